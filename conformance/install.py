"""Install the four OpenStack services of the conformance tier, one venv each.

    python3 conformance/install.py

Each service gets its own venv (their dependency sets conflict with pyccm's and with each
other) from its pinned `conformance/requirements/<service>.txt`, under a cache outside the
repository, so a clean clone on the same machine reinstalls nothing:
`$PYCCM_CONFORMANCE_CACHE`, else `$XDG_CACHE_HOME/pyccm-conformance`, else
`~/.cache/pyccm-conformance`. A venv is reused when its marker records the same
requirements file and Python; otherwise it is rebuilt. The four installs run in parallel.
Standard library only: it runs before anything else is installed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
SERVICES = ("keystone", "neutron", "octavia", "nova")
MARKER = ".pyccm-installed"


def cache_root() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(os.environ.get("PYCCM_CONFORMANCE_CACHE") or default / "pyccm-conformance")


def wanted_marker(requirements: Path) -> str:
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    return f"{digest} python {sys.version_info.major}.{sys.version_info.minor}\n"


def install(service: str) -> str:
    requirements = HERE / "requirements" / f"{service}.txt"
    venv = cache_root() / "venvs" / service
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
    with ThreadPoolExecutor(max_workers=len(SERVICES)) as pool:
        for line in pool.map(install, SERVICES):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
