"""Watching a worker's CURVE handshakes: a key the manager refuses must not look like a
manager that never answers.

libzmq retries a refused handshake on its own (about every 100 ms) and tells nobody; a
monitor socket on the DEALER reports each attempt. The worker logs one line per run of
failures (naming the address and what to check), counts every failure, and gives the
waiting line (runtime/waiting.py) its reason.
"""

from __future__ import annotations

import logging
import struct

import zmq

log = logging.getLogger(__name__)

_FAILURES: dict[int, str] = {
    zmq.EVENT_HANDSHAKE_FAILED_AUTH: "key not authorized",
    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL: "protocol error",
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL: "no detail; often a wrong server key",
}
# A failure "with no detail" is how a wrong server key looks, but also a manager (or a
# Service's backend) going away mid-handshake, which a failover does once: only a run of
# this many in a row is reported (libzmq retries a wrong key every ~100 ms).
_NO_DETAIL_RUN = 3

REFUSED = "it refused the CURVE handshake"


def watch(dealer: zmq.Socket[bytes]) -> zmq.Socket[bytes]:
    """A monitor socket for the DEALER's handshake events."""
    return dealer.get_monitor_socket(
        zmq.EVENT_HANDSHAKE_SUCCEEDED
        | zmq.EVENT_HANDSHAKE_FAILED_AUTH
        | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
        | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    )


def monitor_event(frames: list[bytes]) -> tuple[int, int]:
    """(event, value) of a libzmq monitor message: a 6-byte frame (event id, 16 bits, then
    value, 32 bits, native order) and the endpoint. Read here rather than with
    `zmq.utils.monitor`, which imports asyncio (1.6 MiB per worker,
    docs/architecture.md#lean-imports)."""
    if len(frames) != 2 or len(frames[0]) != 6:
        raise ValueError(f"not a monitor message: {len(frames)} frame(s)")
    event, value = struct.unpack("=Hi", frames[0])
    return event, value


class Handshakes:
    """The handshake events of the DEALER open now. Used by the bus thread."""

    def __init__(self) -> None:
        # Every refused handshake (an unknown key or the wrong server key).
        self.failures = 0
        self._in_a_row = 0
        self._logged = False

    def new_link(self) -> None:
        """The sockets were opened anew (at another manager): a new run starts."""
        self._in_a_row = 0

    def read(self, monitor: zmq.Socket[bytes], *, where: str) -> bool:
        """Read the events waiting on `monitor`; True when one is a refusal worth telling
        (the manager at `where` refuses this worker's key)."""
        refused = False
        while True:
            try:
                event, value = monitor_event(monitor.recv_multipart(zmq.NOBLOCK))
            except zmq.Again:
                return refused
            if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._logged = False
                self._in_a_row = 0
                continue
            self.failures += 1
            self._in_a_row += 1
            if event == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL and self._in_a_row < _NO_DETAIL_RUN:
                continue
            refused = True
            # libzmq retries on its own; one line per run of failures, not one per retry.
            if not self._logged:
                self._logged = True
                log.error(
                    "the manager at %s refused the CURVE handshake (%s, code %d): is this "
                    "worker's public key in its authorized/ directory, and is server.key the "
                    "manager's?",
                    where,
                    _FAILURES.get(event, "failed"),
                    value,
                )
