"""Everything the demo starts ends with the demo, however the demo ends:
`pyccm demo --keep` converges, its eight processes are recorded from /proc (both
simulators, supervisord, the manager, the node, lifecycle, service and route workers), the
demo is signalled, and none of them may remain.

The demo is started as a background shell starts a job: with SIGINT ignored, or with the
stop signals blocked; it installs its own handlers, so neither changes how it ends."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pyccm_sim.demo import REPO
from tests.support.processes import Proc, descendants, kill_all, survivors
from tests.support.waiting import wait_for

CONVERGED = 180.0
# supervisord stops its programs with SIGTERM and waits up to 15 s each (stopwaitsecs).
ENDED = 60.0


def ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def block_stop_signals() -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


# (signal sent, what the demo inherits from its parent, the demo's exit status)
WAYS: dict[str, tuple[signal.Signals, Callable[[], None] | None, int]] = {
    "SIGTERM": (signal.SIGTERM, None, 0),
    "SIGHUP with the stop signals blocked": (signal.SIGHUP, block_stop_signals, 0),
    "SIGINT with SIGINT ignored (a background job)": (signal.SIGINT, ignore_sigint, 0),
    "SIGKILL": (signal.SIGKILL, None, -signal.SIGKILL),
}


@pytest.mark.e2e
@pytest.mark.parametrize("way", list(WAYS))
def test_the_demo_takes_every_process_it_started_with_it(way: str, tmp_path: Path) -> None:
    signum, inherited, expected = WAYS[way]
    out = tmp_path / "demo.out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYCCM_")}
    tree: set[Proc] = set()
    with out.open("wb") as log:
        demo = subprocess.Popen(
            [sys.executable, "-m", "pyccm", "demo", "--nodes=1", "--services=1", "--keep"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=REPO,
            preexec_fn=inherited,  # noqa: PLW1509 (what a shell's job inherits; one call)
        )
    try:
        wait_for(
            lambda: "still running" in out.read_text() or demo.poll() is not None,
            timeout=CONVERGED,
            what="the demo converges and keeps running",
        )
        assert demo.poll() is None, out.read_text()
        tree = descendants(demo.pid)
        commands = " ".join(p.command for p in tree)
        for part in ("sim kube", "sim openstack", "supervisord", "pyccm manager"):
            assert part in commands, commands
        assert commands.count("pyccm worker") == 4, commands
        os.kill(demo.pid, signum)
        assert demo.wait(ENDED) == expected, out.read_text()[-3000:]
        wait_for(
            lambda: not survivors(tree),
            timeout=ENDED,
            what=f"every process of the demo ends after its {signum.name}: {survivors(tree)}",
        )
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        kill_all(tree)
    # --keep keeps the demo's temporary directory.
    kubeconfig = out.read_text().split("kubeconfig ", 1)[1].split()[0]
    shutil.rmtree(Path(kubeconfig).parent, ignore_errors=True)
