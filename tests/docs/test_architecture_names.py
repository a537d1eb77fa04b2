"""docs/architecture.md follows one Service through the code by module and function name;
this fails when a name it gives no longer exists, so the walk-through cannot rot silently."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# `Name.method`, `_private`, `function(args)`: the spans that name code, not prose.
CODE_NAME = re.compile(r"`((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)(?:\([^`]*\))?`")
FILE_NAME = re.compile(r"[\w.-]+\.(?:conf|md|py|yaml|json|toml)")
PATH = re.compile(r"`(pyccm/[\w/]+\.py)`")


def _section(name: str) -> str:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    return text.split(f'<a id="{name}"></a>', 1)[1].split("<a id=", 1)[0]


def _definitions() -> set[str]:
    """Every function, class and module name of the package."""
    files = list((REPO / "pyccm").rglob("*.py"))
    source = "\n".join(p.read_text(encoding="utf-8") for p in files)
    defined = set(re.findall(r"^\s*(?:def|class)\s+(\w+)", source, re.MULTILINE))
    return defined | {p.stem for p in files}


def code_names(text: str) -> set[str]:
    """Dotted names, names with a leading underscore, and calls; a bare CamelCase word may
    be an event reason or a message type, and is left to the reference pages."""
    names: set[str] = set()
    for match in CODE_NAME.finditer(text):
        name = match.group(1)
        if FILE_NAME.fullmatch(name):
            continue  # cloud.conf, BUS.md
        if "." in name or name.startswith("_") or "(" in match.group(0):
            names.update(name.split("."))
    return names


def test_every_function_the_service_walkthrough_names_exists() -> None:
    text = _section("service-path")
    names = code_names(text)
    assert {"Informer", "_handle", "decide", "OctaviaLoadBalancers", "Writer"} <= names

    missing = sorted(names - _definitions())

    assert not missing, f"docs/architecture.md names code that is gone: {missing}"


def test_every_module_the_architecture_names_exists() -> None:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    paths = set(PATH.findall(text))
    assert len(paths) > 20

    missing = sorted(p for p in paths if not (REPO / p).exists())

    assert not missing, missing


def test_a_renamed_function_is_reported() -> None:
    names = code_names("`Runner._process` calls `sync(key)`, then `Vanished.nowhere`")

    assert names - _definitions() == {"Vanished", "nowhere"}


def test_the_layers_table_lists_every_import_contract() -> None:
    contracts = set(re.findall(r"^\[importlinter:contract:([\w-]+)\]", _importlinter(), re.M))
    table = _section("layers").split("So the kube token", 1)[0]
    listed = set(re.findall(r"`([\w-]+)`", "".join(re.findall(r"^\| ([^|]+) \|", table, re.M))))

    assert len(contracts) > 8
    assert listed == contracts


def _importlinter() -> str:
    return (REPO / ".importlinter").read_text(encoding="utf-8")
