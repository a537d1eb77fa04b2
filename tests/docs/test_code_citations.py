"""Every rule the code and the docs cite lives in the repository, and nothing a user reads
names an internal work item or a path on a development machine.

- A citation names a file of the repository (`docs/architecture.md#design-one-writer`,
  `sim/pyccm_sim/openstack/README.md`) whose anchor, when it names one, the file has; none
  names a document the repository does not hold (a numbered section of a reference, a
  section of the founding specification, design or style documents).
- Upstream's own issues and pull requests are public and followable: they are written
  `kubernetes/cloud-provider-openstack#N` (or a URL), never a bare `#N`; the project's own
  work items (`issue N`) are not followable and are not cited at all.
- No development machine's paths (`/work/...`, `/root/...`, `/home/<user>`) in the pages a
  user reads.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from tests.docs.markdown import anchors

REPO = Path(__file__).resolve().parents[2]
ARCHITECTURE = REPO / "docs" / "architecture.md"
# "" is a script or dotfile without a suffix (.ci/run, .importlinter).
TEXT_SUFFIXES = {"", ".py", ".md", ".sh", ".txt", ".conf", ".ini", ".toml", ".json", ".yaml"}
TOP_FILES = (
    "README.md",
    "Makefile",
    ".importlinter",
    "pyproject.toml",
    "Containerfile",
    "supervisord.conf",
)
SKIPPED = {"__pycache__", ".venv", ".tools", ".pytest_cache", ".mypy_cache", ".ruff_cache"}

# Written in pieces so that this file does not cite what it looks for.
SECTION_SIGN = "\u00a7"
OUTSIDE = re.compile(
    "|".join(
        (
            SECTION_SIGN,  # a numbered section of a document
            "SPEC" + r' "',  # a section of the founding specification, by its title
            "SPEC" + r"\.md",
            "DESIGN" + r"(?:\.md| \d| " + SECTION_SIGN + ")",
            "STYLE" + r"(?:\.md| \d)",
        )
    )
)
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+")
PATH_CITATION = re.compile(r"(?<![\w/.$*{-])((?:[\w.-]+/)*[\w-][\w.-]*\.md)(?:#([\w-]+))?")
UP = re.compile(r"^(?:\.\.?/)+")
CITED = re.compile(r"docs/architecture\.md#([\w-]+)")

WORK_ITEM = re.compile(r"\bissues? \d+", re.IGNORECASE)
MARKDOWN_URL_LINK = re.compile(r"\[[^\]\n]*\]\(\s*<?[a-z][a-z0-9+.-]*://[^)\s]*>?\s*\)")
OWNER_REPO_NUMBER = re.compile(r"[\w.-]+/[\w.-]+#\d+\b")
BARE_NUMBER = re.compile(r"(?<!\w)#\d+\b")
MACHINE_PATH = re.compile(r"(?<![\w.$~-])/(?:work|root)/|(?<![\w.$~-])/home/\w|/tmp/pytest-of-")


def _files_under(folder: Path) -> Iterable[Path]:
    for path in folder.rglob("*"):
        wanted = path.suffix in TEXT_SUFFIXES or path.name in TOP_FILES
        if wanted and path.is_file() and not SKIPPED.intersection(path.relative_to(REPO).parts):
            yield path


def sources(*folders: str, top: Iterable[str] = TOP_FILES) -> list[Path]:
    files = [REPO / name for name in top]
    for folder in folders:
        files += _files_under(REPO / folder)
    return sorted(p for p in set(files) if p.is_file())


CITING = sources("pyccm", "sim", "tests", "bench", "conformance", "deploy", "docs", ".ci")
GENERATED = REPO / "docs" / "reference"
# Where a user reads: the product, the simulators, the hand-written docs, the deployment,
# the benchmarks and their results, the tests (whose docstrings explain the behaviour).
USER_FACING = [
    p
    for p in sources("pyccm", "sim", "tests", "bench", "conformance", "deploy", "docs", ".ci")
    if GENERATED not in p.parents
]
MACHINE_FREE = sources("docs", "bench", "deploy", "conformance", top=("README.md",))


def _lines(path: Path) -> Iterable[tuple[int, str]]:
    return enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)


def _where(path: Path, number: int, text: str) -> str:
    name = path.relative_to(REPO) if REPO in path.parents else path.name
    return f"{name}:{number}: {text.strip()[:120]}"


def outside_citations(paths: Iterable[Path]) -> list[str]:
    """Lines that cite a document the repository does not hold."""
    return [
        _where(path, n, line) for path in paths for n, line in _lines(path) if OUTSIDE.search(line)
    ]


def _candidates(path: Path, cited: str) -> list[Path]:
    """The repository's files a path-like citation may mean: relative to the citing file's
    folder or any folder above it up to the root, or a file whose path ends with it."""
    folders = [f for f in (path.parent, *path.parent.parents) if REPO in (f, *f.parents)]
    found = [f / cited for f in folders or [path.parent] if (f / cited).is_file()]
    if not found:
        found = [p for p in MARKDOWN if p.as_posix().endswith("/" + UP.sub("", cited))]
    return found


MARKDOWN = sorted(p for p in CITING if p.suffix == ".md")


def unresolved_paths(paths: Iterable[Path]) -> list[str]:
    """Path-like citations (a folder and a Markdown file, or a Markdown file and an anchor)
    whose file or anchor is not in the repository. A bare file name is not a citation (the
    benchmarks name the files they write that way); URLs are someone else's."""
    broken = []
    for path in paths:
        for n, line in _lines(path):
            for cited, anchor in PATH_CITATION.findall(URL.sub("", line)):
                if "/" not in cited and not anchor:
                    continue
                files = _candidates(path, cited)
                if not files:
                    broken.append(_where(path, n, f"{cited} (no such file)"))
                elif anchor and not any(anchor in anchors(f) for f in files):
                    broken.append(_where(path, n, f"{cited}#{anchor} (no such anchor)"))
    return broken


def work_items(paths: Iterable[Path]) -> list[str]:
    """Lines naming an internal work item (the word issue and a number) or a number that is
    not followable (a hash and a number without `owner/repo` before it, outside a link to a
    URL)."""
    found = []
    for path in paths:
        for n, line in _lines(path):
            rest = OWNER_REPO_NUMBER.sub("", URL.sub("", MARKDOWN_URL_LINK.sub("", line)))
            if WORK_ITEM.search(line) or BARE_NUMBER.search(rest):
                found.append(_where(path, n, line))
    return found


def machine_paths(paths: Iterable[Path]) -> list[str]:
    return [
        _where(path, n, line)
        for path in paths
        for n, line in _lines(path)
        if MACHINE_PATH.search(line)
    ]


def test_no_citation_names_a_document_outside_the_repository() -> None:
    assert outside_citations(CITING) == []


def test_every_path_like_citation_names_a_file_and_anchor_of_the_repository() -> None:
    assert unresolved_paths(CITING) == []


def test_every_citation_of_the_architecture_page_names_one_of_its_anchors() -> None:
    known = anchors(ARCHITECTURE)
    cited = {
        (str(path.relative_to(REPO)), anchor)
        for path in CITING
        for anchor in CITED.findall(path.read_text(encoding="utf-8"))
    }
    assert len(cited) > 20  # the code does cite it
    assert sorted(c for c in cited if c[1] not in known) == []


def test_no_internal_work_item_number_where_a_user_reads() -> None:
    assert work_items(USER_FACING) == []


def test_no_development_machine_path_where_a_user_reads() -> None:
    assert machine_paths(MACHINE_FREE) == []


def test_each_citation_form_is_caught(tmp_path: Path) -> None:
    """The checks above find what they are meant to find, and leave alone what is fine."""
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("# Some Title\n")
    sign = SECTION_SIGN
    number, md = "#" + "3102", ".md"
    bad = [
        f"the waits (reference {sign}3.8)",
        f"upstream {sign}1.3",
        "SPEC" + ' "informers"',
        "DESIGN" + f" {sign}4",
        "STYLE" + " 7",
        "see issue" + " 14",
        "(issues" + " 6 and 12)",
        f"upstream {number}",
        f"({number})",
        "cloned from /" + "work/main",
        "/" + "home/someone/pyccm",
    ]
    fine = [
        f"kubernetes/cloud-provider-openstack{number}",
        f"[cloud-provider-openstack{number}](https://github.com/k/c/issues/2866)",
        f"https://example.com/README{md}#x",
        "~/.cache/pyccm-conformance",
        f"there{md}#some-title",
        "color #73BF69",
    ]
    broken = [f"there{md}#nope", f"gone/missing{md}"]
    page.write_text("\n".join(bad + fine + broken) + "\n")

    assert len(outside_citations([page])) == 5
    assert len(work_items([page])) == 4
    assert len(machine_paths([page])) == 2
    assert [b.split(": ", 1)[1] for b in unresolved_paths([page])] == [
        f"{broken[0]} (no such anchor)",
        f"{broken[1]} (no such file)",
    ]
