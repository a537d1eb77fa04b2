"""Loopback TCP ports for servers a test starts, safe under pytest-xdist.

A port taken from the kernel's ephemeral range (bind to port 0, close, hand out) can be
given again at once to another worker's probe, or taken by any of the many outgoing
connections the tests make (their local ports come from that range too). So ports are
handed out from below the ephemeral range (Linux's default starts at 32768), in a block of
its own for each xdist worker, never twice in one process, each checked free by binding it.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
import threading

# Below /proc/sys/net/ipv4/ip_local_port_range's default start (32768): 20000-30799.
FIRST = 20000
BLOCK = 1200
WORKER_BLOCKS = 8


def _block() -> range:
    """This process's block: one per xdist worker (gw0, gw1, ...); a run without xdist
    gets a block past the workers', so it does not meet a parallel run's workers either."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) % WORKER_BLOCKS if worker.startswith("gw") else WORKER_BLOCKS
    start = FIRST + index * BLOCK
    return range(start, start + BLOCK)


_BLOCK = _block()
# From a random place in the block: two runs on one machine (other checkouts, the same
# worker number) seldom walk the same ports at the same time.
_COUNTER = itertools.count(random.randrange(BLOCK))
_LOCK = threading.Lock()


def free_port() -> int:
    """A port on 127.0.0.1 that nothing is bound to now and this process has not handed out
    before (until it has gone round its block)."""
    with _LOCK:
        for _ in range(BLOCK):
            port = _BLOCK.start + next(_COUNTER) % BLOCK
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
    raise RuntimeError(f"no free port in {_BLOCK.start}-{_BLOCK.stop - 1}")
