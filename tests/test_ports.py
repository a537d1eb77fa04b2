"""tests/support/ports.py: the ports a test's servers listen on stay apart between xdist
workers and away from the kernel's ephemeral range (where outgoing connections and other
runs' probes take theirs)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[1]
EPHEMERAL_START = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def ports_of(worker: str | None, count: int = 50) -> list[int]:
    """`count` ports handed out by a fresh process that is xdist worker `worker`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"}
    if worker is not None:
        env["PYTEST_XDIST_WORKER"] = worker
    code = (
        "import json; from tests.support.ports import free_port; "
        f"print(json.dumps([free_port() for _ in range({count})]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    ports: list[int] = json.loads(done.stdout)
    return ports


def test_workers_get_disjoint_ports_below_the_ephemeral_range() -> None:
    by_worker = {worker: set(ports_of(worker)) for worker in ("gw0", "gw1", "gw7", None)}

    for ports in by_worker.values():
        assert len(ports) == 50  # never the same port twice in one process
        assert max(ports) < EPHEMERAL_START
    seen: set[int] = set()
    for ports in by_worker.values():
        assert not ports & seen
        seen |= ports


def test_a_handed_out_port_can_be_listened_on_and_is_not_handed_out_again() -> None:
    port = free_port()
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))
        server.listen()
        assert port not in {free_port() for _ in range(20)}
