"""The test tree's structure: helpers come from tests.support, fixtures through conftest files.

A module that imports a conftest module takes that folder's fixtures in as module globals
(re-exported with `noqa: F401`), ties itself to another folder's layout, and has pytest's
fixtures shadowed by plain imports; helpers shared by several modules live in tests/support/.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Everything that may import from the tests package: the tests, the benches, the
# conformance installer.
SOURCES = sorted(
    p for folder in ("tests", "bench", "conformance") for p in (REPO / folder).rglob("*.py")
)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every module `path` imports; relative imports resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = path.relative_to(REPO).parent.parts
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            module = ".".join((*base, *(node.module.split(".") if node.module else ())))
            found.append((node.lineno, module))
            # `from tests.bus import conftest`: a name that may itself be a module.
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def offences(path: Path) -> list[str]:
    where = path.relative_to(REPO)
    wrong = []
    for line, module in imported_modules(path):
        last = module.rsplit(".", 1)[-1]
        if last == "conftest":
            wrong.append(f"{where}:{line} imports {module} (import from tests.support instead)")
    return wrong


def test_no_module_imports_a_conftest_module() -> None:
    wrong = [offence for path in SOURCES for offence in offences(path)]
    assert wrong == [], "\n".join(wrong)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from tests.bus.conftest import node\n", "imports tests.bus.conftest"),
        ("from .conftest import sample\n", "imports tests.workqueue.conftest"),
        ("from . import conftest\n", "imports tests.workqueue.conftest"),
        ("import tests.e2e.conftest\n", "imports tests.e2e.conftest"),
    ],
)
def test_the_check_sees_every_spelling(tmp_path: Path, source: str, expected: str) -> None:
    # A module as if it were in tests/workqueue/ (relative imports resolve from there).
    folder = REPO / "tests" / "workqueue"
    probe = folder / f"_structure_probe_{tmp_path.name}.py"
    probe.write_text(source)
    try:
        (found,) = offences(probe)
    finally:
        probe.unlink()
    assert expected in found


def test_tests_support_imports_no_conftest_either() -> None:
    support = sorted((REPO / "tests" / "support").glob("*.py"))
    assert support, "tests/support is where the shared helpers live"
    assert all(not offences(path) for path in support)
