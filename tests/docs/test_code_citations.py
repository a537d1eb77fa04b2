"""The code cites the rules it follows as `docs/architecture.md#<anchor>`: every such citation
names an anchor the page has, and none cites the founding documents outside the repository
(`DESIGN §n`, `STYLE n`), which a reader of the code cannot open."""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.markdown import anchors

REPO = Path(__file__).resolve().parents[2]
ARCHITECTURE = REPO / "docs" / "architecture.md"
OUTSIDE = re.compile("DESIGN" + r" §\d+|" + "STYLE" + r" \d+\b")
CITED = re.compile(r"docs/architecture\.md#([\w-]+)")


def sources() -> list[Path]:
    files = [REPO / ".importlinter", REPO / "pyproject.toml", REPO / "Makefile"]
    for folder in ("pyccm", "tests", "bench", "conformance", "deploy", "docs"):
        files += [p for p in (REPO / folder).rglob("*") if p.suffix in (".py", ".md", ".yaml")]
    return [p for p in files if p.is_file() and "__pycache__" not in p.parts]


def test_no_citation_names_a_document_outside_the_repository() -> None:
    found = [
        f"{path.relative_to(REPO)}: {hit}"
        for path in sources()
        for hit in OUTSIDE.findall(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_every_citation_of_the_architecture_page_names_one_of_its_anchors() -> None:
    known = anchors(ARCHITECTURE)
    cited = {
        (str(path.relative_to(REPO)), anchor)
        for path in sources()
        for anchor in CITED.findall(path.read_text(encoding="utf-8"))
    }
    assert len(cited) > 20  # the code does cite it
    assert sorted(c for c in cited if c[1] not in known) == []
