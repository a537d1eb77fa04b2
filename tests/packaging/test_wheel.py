"""The built wheels: the product's installs one import name, `pyccm`, and works from a fresh
environment; the simulators' (sim/, pyccm-sim) installs beside it and runs on its own.

Every layer lives inside pyccm/ (manager/, workers/, ...); the wheel must ship nothing else, or
`protocol`, `manager`, ... become top-level names in site-packages and collide with other
distributions. What ships is the product: no simulator, no demo, no fake provider, no aiohttp.
So: build the wheels from the checkout, install them with their locked runtime dependencies
into new virtual environments (no system site-packages), and use them from a directory
outside the checkout, where the repository's folders are not on sys.path.
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
# The product's layers, each a package of the wheel.
LAYERS = ("protocol", "manager", "workers", "provider", "kubeapi")
# What only the simulators' distribution has, and its own dependency.
TEST_WORLD = ("pyccm_sim", "pyccm_sim.demo", "pyccm_sim.fake_provider", "aiohttp")


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


def install(scratch: Path, name: str, *wheels: Path, package: str | None = None) -> Path:
    """A new venv `scratch/name` with `wheels` and their runtime dependencies at the versions
    uv.lock pins (the image installs the same); its Python."""
    constraints = scratch / f"{name}-constraints.txt"
    selected = ["--package", package] if package else []
    uv(
        "export",
        "--frozen",
        "--no-dev",
        *selected,
        "--no-hashes",
        "--no-emit-workspace",
        "--quiet",
        "--output-file",
        str(constraints),
        cwd=REPO,
    )
    venv = scratch / name
    uv("venv", "--quiet", "--python", base_python(), str(venv), cwd=scratch)
    python = venv / "bin" / "python"
    uv("pip", "install", "--quiet", "--python", str(python), "-c", str(constraints),
       *map(str, wheels), cwd=scratch)  # fmt: skip
    return python


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    scratch = tmp_path_factory.mktemp("wheel")
    uv("build", "--wheel", "--out-dir", str(scratch / "dist"), str(REPO), cwd=scratch)
    (wheel,) = (scratch / "dist").glob("pyccm-*.whl")
    python = install(scratch, "venv", wheel)
    outside = scratch / "elsewhere"
    outside.mkdir()
    return Installed(wheel=wheel, python=python, pyccm=python.parent / "pyccm", outside=outside)


@pytest.fixture(scope="module")
def simulators(installed: Installed) -> Path:
    """The simulators' wheel installed with the product's: the venv's Python."""
    scratch = installed.wheel.parent.parent
    dist = scratch / "sim-dist"
    uv("build", "--wheel", "--out-dir", str(dist), str(REPO / "sim"), cwd=scratch)
    (wheel,) = dist.glob("pyccm_sim-*.whl")
    return install(scratch, "sim-venv", installed.wheel, wheel, package="pyccm-sim")


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
    for folder in LAYERS:
        assert f"pyccm/{folder}/__init__.py" in names
    assert not [name for name in names if "sim" in name.split("/") or "demo" in name]
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in names)


@pytest.mark.parametrize(
    ("arguments", "first_line"),
    [
        (["--help"], "usage: pyccm [-h] [--version] COMMAND ..."),
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
    probed = ("pyccm.manager.app", *FOLDERS, *TEST_WORLD)
    done = run(installed, str(installed.python), "-c", PROBE, *probed)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert not any(entry.startswith(str(REPO)) for entry in answer["path"] if entry)
    assert answer["found"] == {
        "pyccm.manager.app": "imported",
        **{name: f"ModuleNotFoundError: {name.split('.')[0]}" for name in (*FOLDERS, *TEST_WORLD)},
    }
    # Not from a link to the checkout: from the environment's own site-packages.
    where = run(installed, str(installed.python), "-c", "import pyccm; print(pyccm.__file__)")
    assert Path(where.stdout.strip()).is_relative_to(Path(answer["prefix"]))


def test_the_product_alone_has_no_demo_and_no_fake_cloud(installed: Installed) -> None:
    demo = run(installed, str(installed.pyccm), "demo")
    assert demo.returncode == 2
    assert "invalid choice: 'demo'" in demo.stderr
    providers = run(installed, str(installed.pyccm), "--version").stdout.splitlines()
    assert [line for line in providers if line.startswith("provider ")] == [
        "provider openstack pyccm.provider.openstack:create_cloud"
    ]


def test_the_simulators_install_beside_the_product_and_run_on_their_own(
    installed: Installed, simulators: Path
) -> None:
    for command in (
        [str(simulators), "-m", "pyccm_sim", "openstack", "--help"],
        [str(simulators.parent / "pyccm-sim"), "kube", "--help"],
        [str(simulators.parent / "pyccm"), "demo", "--help"],
    ):
        done = run(installed, *command)
        assert done.returncode == 0, f"{command}: {done.stderr}"
        assert done.stdout.startswith("usage: "), done.stdout
    providers = run(installed, str(simulators.parent / "pyccm"), "--version")
    assert "provider fake pyccm_sim.fake_provider:create_cloud" in providers.stdout
