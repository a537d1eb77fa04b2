"""Install the four OpenStack services of the conformance tier, one venv each.

    python3 conformance/install.py                 # the default release (DEFAULT_RELEASE)
    OPENSTACK_RELEASE=2024.1 python3 conformance/install.py
    python3 conformance/install.py --release 2024.1

Each service gets its own venv (their dependency sets conflict with pyccm's and with each
other) from the pinned `conformance/requirements/<release>/<service>.txt`, under a cache
outside the repository, so a clean clone on the same machine reinstalls nothing:
`$PYCCM_CONFORMANCE_CACHE`, else `$XDG_CACHE_HOME/pyccm-conformance`, else
`~/.cache/pyccm-conformance`. The default release's venvs are in its `venvs/`, every other
release's in `venvs-<release>/`, so releases coexist. A venv is reused when its marker
records the same requirements file and Python; otherwise it is rebuilt. The four installs run
in parallel. Standard library only: it runs before anything else is installed.
`tests/conformance/realcloud.py` loads this file for the same release and venv paths.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements"
SERVICES = ("keystone", "neutron", "octavia", "nova")
MARKER = ".pyccm-installed"
# Keystone 30, Neutron 29, Octavia 19, Nova 34. docs/openstack-releases.md lists the others.
DEFAULT_RELEASE = "2026.2"


def known_releases() -> list[str]:
    return sorted(p.name for p in REQUIREMENTS.iterdir() if (p / "keystone.txt").is_file())


def selected_release(given: str | None = None) -> str:
    """`given`, else $OPENSTACK_RELEASE, else the default; SystemExit naming the known ones."""
    release = given or os.environ.get("OPENSTACK_RELEASE") or DEFAULT_RELEASE
    if release not in known_releases():
        raise SystemExit(
            f"unknown OpenStack release {release!r}: known {', '.join(known_releases())}"
        )
    return release


def cache_root() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(os.environ.get("PYCCM_CONFORMANCE_CACHE") or default / "pyccm-conformance")


def venvs_dir(release: str) -> Path:
    return cache_root() / ("venvs" if release == DEFAULT_RELEASE else f"venvs-{release}")


def wanted_marker(requirements: Path) -> str:
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    return f"{digest} python {sys.version_info.major}.{sys.version_info.minor}\n"


def install(release: str, service: str) -> str:
    requirements = REQUIREMENTS / release / f"{service}.txt"
    venv = venvs_dir(release) / service
    marker = venv / MARKER
    wanted = wanted_marker(requirements)
    if marker.exists() and marker.read_text() == wanted:
        return f"{service}: cached ({venv})"
    started = time.monotonic()
    if venv.is_symlink():
        venv.unlink()
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    log = venv.parent / f"{service}-install.log"
    with log.open("w") as out:
        steps = [
            [sys.executable, "-m", "venv", str(venv)],
            [str(venv / "bin" / "pip"), "install", "--quiet", "-r", str(requirements)],
        ]
        for step in steps:
            if subprocess.run(step, stdout=out, stderr=out, check=False).returncode != 0:
                raise SystemExit(f"{service}: install failed, see {log}")
    marker.write_text(wanted)
    return f"{service}: installed in {time.monotonic() - started:.0f} s ({venv})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", help=f"default: $OPENSTACK_RELEASE or {DEFAULT_RELEASE}")
    release = selected_release(parser.parse_args().release)
    print(f"OpenStack {release}", flush=True)
    with ThreadPoolExecutor(max_workers=len(SERVICES)) as pool:
        for line in pool.map(lambda service: install(release, service), SERVICES):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
