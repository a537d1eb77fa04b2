"""`python -m tests.conformance.realcloud DIR`, the stack to poke at by hand, takes its real
Keystone, Neutron, Octavia and Nova with it however it ends: it once stopped them
on Ctrl-C only, and a SIGTERM left all four serving."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conformance.realcloud import REPO, SERVICES, venv_python
from tests.support.processes import Proc, descendants, kill_all, survivors
from tests.support.waiting import wait_for

pytestmark = pytest.mark.conformance

# Installing the databases and starting four services takes minutes on a busy machine.
STARTED = 420.0


def serving(processes: set[Proc]) -> list[str]:
    """The services of the `services.py serve NAME ...` processes among `processes`."""
    return sorted(
        p.command.split(" serve ", 1)[1].split()[0] for p in processes if " serve " in p.command
    )


@pytest.mark.timeout(600)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_the_harness_stops_its_services_when_it_ends(
    signum: signal.Signals, tmp_path: Path
) -> None:
    if not all(venv_python(service).exists() for service in SERVICES):
        pytest.skip("the conformance services are not installed: make conformance")
    out = tmp_path / "harness.out"
    services: set[Proc] = set()
    with out.open("wb") as log:
        harness = subprocess.Popen(
            [sys.executable, "-m", "tests.conformance.realcloud", str(tmp_path / "stack")],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
    try:
        wait_for(
            lambda: "cloud.conf:" in out.read_text() or harness.poll() is not None,
            timeout=STARTED,
            what="the four services serve",
        )
        assert harness.poll() is None, out.read_text()[-3000:]
        # The four serve processes, as /proc shows them (read until it shows all four: the
        # stack says it serves once each answers, and a loaded machine read it short once).
        wait_for(
            lambda: serving(descendants(harness.pid)) == sorted(SERVICES),
            timeout=60,
            what=f"the four services below the harness: {serving(descendants(harness.pid))}",
        )
        services = descendants(harness.pid)
        os.kill(harness.pid, signum)
        harness.wait(60)
        wait_for(
            lambda: not survivors(services),
            timeout=60,
            what=f"every service ends after the harness's {signum.name}: {survivors(services)}",
        )
        if signum != signal.SIGKILL:
            assert harness.returncode == 0, out.read_text()[-3000:]
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
        kill_all(services)
