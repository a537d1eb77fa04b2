"""`pyccm.lifetime` on a small tree: a Python parent that starts one child, ended in each way a
starter ends (a signal it handles, one it inherited as ignored, SIGKILL); the child must
end with it. The parent starts its child from a thread that has ended by then: the kernel's
parent-death signal follows the forking *thread*, and must not fire while the parent lives."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable

import pytest

from tests.support.processes import Proc, descendants, kill_all, survivors
from tests.support.waiting import wait_for

PARENT = """
import sys, threading, time
from pyccm import lifetime
lifetime.stop_on_signals()
started = []
sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
thread = threading.Thread(target=lambda: started.append(lifetime.spawn(sleeper)))
thread.start()
thread.join()
time.sleep(1)  # the window in which a signal for the ended thread would have arrived
print("child", started[0].pid, started[0].poll(), flush=True)
time.sleep(600)
"""


def ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


WAYS: dict[str, tuple[signal.Signals, Callable[[], None] | None, int]] = {
    "SIGTERM": (signal.SIGTERM, None, 128 + signal.SIGTERM),
    "SIGHUP": (signal.SIGHUP, None, 128 + signal.SIGHUP),
    "SIGINT, ignored by its own parent": (signal.SIGINT, ignore_sigint, 128 + signal.SIGINT),
    "SIGKILL": (signal.SIGKILL, None, -signal.SIGKILL),
}


@pytest.mark.parametrize("way", list(WAYS))
def test_a_child_ends_with_its_parent(way: str) -> None:
    signum, inherited, expected = WAYS[way]
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=inherited,  # noqa: PLW1509 (what a shell's job inherits; one signal call)
    )
    children: set[Proc] = set()
    try:
        assert parent.stdout is not None
        _, pid, status = parent.stdout.readline().split()
        assert status == "None", "the child died when the thread that started it ended"
        children = descendants(parent.pid)
        assert [p.pid for p in children] == [int(pid)]
        os.kill(parent.pid, signum)
        assert parent.wait(30) == expected
        wait_for(lambda: not survivors(children), timeout=30, what="the child ends")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        kill_all(children)
        if parent.stdout is not None:
            parent.stdout.close()
