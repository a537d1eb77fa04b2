"""Every `DESIGN §n` / `STYLE n` citation left in the code has a row in docs/architecture.md's
"Former citations" table, pointing at an anchor of that page; once the citations are
rewritten there is nothing left to check."""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.markdown import anchors

REPO = Path(__file__).resolve().parents[2]
ARCHITECTURE = REPO / "docs" / "architecture.md"
CITATION = re.compile(r"DESIGN §\d+|STYLE \d+")
SOURCES = ("pyccm", "tests", "bench")
ROW = re.compile(r"^\| `([^`]+)` \| [^|]* \| ([^|]+) \| (.+) \|$", re.MULTILINE)


def citations() -> set[tuple[str, str]]:
    files = [REPO / ".importlinter", REPO / "pyproject.toml"]
    for folder in SOURCES:
        files += [p for p in (REPO / folder).rglob("*") if p.suffix in (".py", ".md")]
    found = set()
    for path in files:
        if path.is_file() and "tests/docs" not in path.as_posix():
            text = path.read_text(encoding="utf-8")
            found |= {(str(path.relative_to(REPO)), c) for c in CITATION.findall(text)}
    return found


def table() -> dict[tuple[str, str], list[str]]:
    text = ARCHITECTURE.read_text(encoding="utf-8").split('<a id="former-citations"></a>')[1]
    rows: dict[tuple[str, str], list[str]] = {}
    for path, cited, now in ROW.findall(text):
        for one in CITATION.findall(cited):
            rows.setdefault((path, one), []).extend(re.findall(r"\(#([\w-]+)\)", now))
    return rows


def test_every_citation_in_the_code_has_a_row() -> None:
    missing = sorted(citations() - set(table()))

    assert not missing, f"add these to docs/architecture.md, Former citations: {missing}"


def test_every_row_points_at_a_section_of_the_page() -> None:
    known = anchors(ARCHITECTURE)
    rows = table()
    assert rows

    dangling = {key: a for key, targets in rows.items() for a in targets if a not in known}

    assert not dangling
