"""The time source of the work queue and its rate limiters, so that tests can own time.

Backoffs run from 5 ms to 1000 s and retry delays are chosen by the cloud; a test that waited for
them in real time would be slow and would fail on a busy machine. Everything in the queue therefore
reads time and blocks through a `Clock`: production uses `MONOTONIC`, tests use `FakeClock`, whose
time only moves when the test calls `advance()`.

A clock does two things: it tells the time, and it blocks a thread on a condition until either the
condition is notified or a deadline *on this clock* has passed. The second part is what makes a fake
clock able to wake a thread that waits for a delayed key.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """A monotonic time source that can block a thread until a deadline on itself."""

    def now(self) -> float:
        """Seconds on a monotonic scale; only differences mean anything."""
        ...

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        """Block on `cond` (whose lock the caller holds) for at most `timeout` seconds of this
        clock, or until notified. May return early (spurious wake-up): callers re-check."""
        ...


class MonotonicClock:
    """The real clock: `time.monotonic()`, immune to wall-clock jumps (NTP, DST)."""

    def now(self) -> float:
        return time.monotonic()

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        cond.wait(timeout)


MONOTONIC: Clock = MonotonicClock()


class FakeClock:
    """A clock that only moves when told to; for deterministic tests of delays and backoff.

    A thread blocked in `wait()` wakes when the clock is advanced (it then re-checks its own
    deadline) or when its condition is notified. Tests synchronise with blocked threads through
    `wait_for_sleepers()` instead of sleeping.
    """

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        # Conditions that threads are blocked on right now, with how many threads per condition.
        self._sleeping: dict[threading.Condition, int] = {}

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every sleeper so that it re-checks its deadline."""
        if seconds < 0:
            raise ValueError("a monotonic clock does not go backwards")
        with self._lock:
            self._now += seconds
            sleeping = list(self._sleeping)
        # Notify outside our own lock: a sleeper holds its condition's lock while it registers
        # with us, so taking ours and then theirs here could deadlock.
        for cond in sleeping:
            with cond:
                cond.notify_all()

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        if timeout is not None and timeout <= 0:
            return
        self._register(cond, +1)
        try:
            # No real-time timeout: only advance() or a notify on `cond` ends the wait. The caller
            # holds `cond`'s lock, so an advance() racing with this line cannot notify before we
            # are waiting (it blocks on that lock until wait() releases it).
            cond.wait()
        finally:
            self._register(cond, -1)

    def sleepers(self) -> int:
        """How many threads are blocked in `wait()` right now."""
        with self._lock:
            return sum(self._sleeping.values())

    def wait_for_sleepers(self, count: int, timeout: float = 10.0) -> bool:
        """Block (in real time, at most `timeout`) until at least `count` threads are blocked in
        `wait()`. Returns whether that happened; tests assert on it."""
        with self._changed:
            return self._changed.wait_for(
                lambda: sum(self._sleeping.values()) >= count, timeout=timeout
            )

    def _register(self, cond: threading.Condition, delta: int) -> None:
        with self._lock:
            remaining = self._sleeping.get(cond, 0) + delta
            if remaining:
                self._sleeping[cond] = remaining
            else:
                del self._sleeping[cond]
            self._changed.notify_all()
