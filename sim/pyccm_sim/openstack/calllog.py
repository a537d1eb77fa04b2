"""The call log: every service request the simulator answered, for tests and benchmarks.

Tests assert on behaviour through it ("this sync made no write calls", "the batch member
PUT happened once"), so it records what a reviewer would look for in a real cloud's
access log: service, method, path with query, status and latency. Credentials never
reach it: request bodies are not logged and secret-looking query values are masked.

Appended on the event loop thread, read from test threads: a lock guards the deque.
"""

from __future__ import annotations

import threading
import urllib.parse
from collections import deque
from dataclasses import dataclass
from typing import NewType

Seq = NewType("Seq", int)

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SECRET_WORDS = ("password", "secret", "token", "credential")
# Enough for a long benchmark without unbounded growth; older calls fall off.
MAX_CALLS = 500_000


@dataclass(frozen=True, slots=True)
class Call:
    seq: Seq
    service: str
    method: str
    path: str
    status: int
    latency_ms: float

    @property
    def is_write(self) -> bool:
        """A mutation of the cloud; Keystone token requests are reads for this purpose."""
        return self.method in WRITE_METHODS and self.service != "identity"


class CallLog:
    def __init__(self, maxlen: int = MAX_CALLS) -> None:
        self._calls: deque[Call] = deque(maxlen=maxlen)
        self._lock = threading.Lock()
        self._next = 0

    def record(
        self, *, service: str, method: str, path: str, status: int, latency_ms: float
    ) -> None:
        with self._lock:
            call = Call(Seq(self._next), service, method, path, status, latency_ms)
            self._next += 1
            self._calls.append(call)

    def mark(self) -> Seq:
        """The sequence number the next call will get; pass it to `since`."""
        with self._lock:
            return Seq(self._next)

    def since(self, mark: Seq = Seq(0)) -> list[Call]:
        with self._lock:
            return [call for call in self._calls if call.seq >= mark]

    def clear(self) -> None:
        with self._lock:
            self._calls.clear()


def mask_query(query_string: str) -> str:
    """The query string with secret-looking values replaced by `***`."""
    if not query_string:
        return ""
    pairs = urllib.parse.parse_qsl(query_string, keep_blank_values=True)
    masked = [
        (name, "***" if any(word in name.lower() for word in SECRET_WORDS) else value)
        for name, value in pairs
    ]
    # Decoded, so a test can look for `name=^node-0001$` as the client meant it.
    return "&".join(f"{name}={value}" for name, value in masked)
