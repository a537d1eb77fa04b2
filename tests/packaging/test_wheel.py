"""The built wheel installs one import name, `pyccm`, and works from a fresh environment.

Every layer lives inside pyccm/ (manager/, workers/, ...); the wheel must ship nothing else, or
`protocol`, `manager`, `sim`, ... become top-level names in site-packages and collide with
other distributions. So: build the wheel from the checkout, install it with its locked
runtime dependencies into a new virtual environment (no system site-packages), and use
it from a directory outside the checkout, where the repository's folders are not on
sys.path.
"""

from __future__ import annotations

import json
import os
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.packaging.containerfile import base_python
from tests.packaging.test_containerfile import uv_binary

REPO = Path(__file__).resolve().parents[2]
# The repository's folders that were once top-level names of the wheel.
FOLDERS = ("protocol", "manager", "workers", "provider", "kubeapi", "sim", "bench")


@dataclass(frozen=True)
class Installed:
    wheel: Path
    python: Path
    pyccm: Path
    outside: Path  # a working directory outside the checkout


def uv(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        [str(uv_binary()), *args],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"uv {' '.join(args)}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def clean_env() -> dict[str, str]:
    """This machine's environment without the test's own virtual environment or paths."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VIRTUAL_ENV", "PYTHON", "UV_PROJECT", "PYCCM_"))
    }


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    scratch = tmp_path_factory.mktemp("wheel")
    uv("build", "--wheel", "--out-dir", str(scratch / "dist"), str(REPO), cwd=scratch)
    (wheel,) = (scratch / "dist").glob("pyccm-*.whl")
    # The runtime dependencies at the versions uv.lock pins (the image installs the same).
    constraints = scratch / "constraints.txt"
    uv(
        "export",
        "--frozen",
        "--no-dev",
        "--no-hashes",
        "--no-emit-project",
        "--quiet",
        "--output-file",
        str(constraints),
        cwd=REPO,
    )
    venv = scratch / "venv"
    uv("venv", "--quiet", "--python", base_python(), str(venv), cwd=scratch)
    python = venv / "bin" / "python"
    uv(
        "pip",
        "install",
        "--quiet",
        "--python",
        str(python),
        "-c",
        str(constraints),
        str(wheel),
        cwd=scratch,
    )
    outside = scratch / "elsewhere"
    outside.mkdir()
    return Installed(wheel=wheel, python=python, pyccm=venv / "bin" / "pyccm", outside=outside)


def run(installed: Installed, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(command),
        cwd=installed.outside,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_wheel_holds_only_the_pyccm_package_and_its_metadata(installed: Installed) -> None:
    names = zipfile.ZipFile(installed.wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"pyccm", "pyccm-0.1.0.dist-info"}
    for folder in FOLDERS[:-1]:
        assert f"pyccm/{folder}/__init__.py" in names
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in names)


@pytest.mark.parametrize(
    ("arguments", "first_line"),
    [
        (["--help"], "usage: pyccm [-h] [--version] COMMAND ..."),
        (["demo", "--help"], "usage: pyccm demo [-h]"),
        (["manager", "--help"], "usage: pyccm manager [-h]"),
        (["--version"], "pyccm 0.1.0"),
    ],
)
def test_the_installed_command_answers(
    installed: Installed, arguments: list[str], first_line: str
) -> None:
    done = run(installed, str(installed.pyccm), *arguments)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(first_line)


PROBE = """
import importlib, json, sys
found = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
        found[name] = "imported"
    except ModuleNotFoundError as error:
        found[name] = "ModuleNotFoundError: " + str(error.name)
print(json.dumps({"found": found, "path": sys.path, "prefix": sys.prefix}))
"""


def test_only_pyccm_is_importable(installed: Installed) -> None:
    done = run(installed, str(installed.python), "-c", PROBE, "pyccm.manager.app", *FOLDERS)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert not any(entry.startswith(str(REPO)) for entry in answer["path"] if entry)
    assert answer["found"] == {
        "pyccm.manager.app": "imported",
        **{name: f"ModuleNotFoundError: {name}" for name in FOLDERS},
    }
    # Not from a link to the checkout: from the environment's own site-packages.
    where = run(installed, str(installed.python), "-c", "import pyccm; print(pyccm.__file__)")
    assert Path(where.stdout.strip()).is_relative_to(Path(answer["prefix"]))
