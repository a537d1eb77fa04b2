"""Waiting on a condition with a deadline: the system under test reacts asynchronously, so
a test polls until the condition holds (or fails with the last thing it saw); nothing
sleeps and hopes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
# How often a condition is re-checked: often enough to see a one-second state, rarely
# enough not to load a 2-core machine that also runs the process tree.
POLL_INTERVAL = 0.1


def wait_for(
    probe: Callable[[], T | None], *, timeout: float, what: str, poll: float = POLL_INTERVAL
) -> T:
    """Poll `probe` until it returns something truthy; return it. On timeout, fail with
    `what` and the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        seen = probe()
        if seen:
            return seen
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f}s: {what}; last seen: {seen!r}")
        time.sleep(poll)


def eventually(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """`wait_for` for in-process parts (a bus, a replica) that react in milliseconds."""
    wait_for(condition, timeout=timeout, what="condition", poll=0.01)


class Background(Generic[T]):
    """Runs a blocking call in a daemon thread; `result()` joins it with a generous deadline."""

    def __init__(self, call: Callable[[], T]) -> None:
        self._value: list[T] = []
        self._thread = threading.Thread(target=lambda: self._value.append(call()), daemon=True)
        self._thread.start()

    def result(self, timeout: float = 10.0) -> T:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the blocking call did not return"
        return self._value[0]

    @property
    def finished(self) -> bool:
        return not self._thread.is_alive()
