"""The provider's pacing: its one token bucket and its one backoff.

`TokenBucket` throttles every HTTP request of the process (`OpenStackClient`, Keystone's
requests included); `Backoff` spaces out the syncs of a load balancer that is still
PENDING_* (`loadbalancer.api.Api.backoff`). Each is defined here only, behind the small
interface its users call (`acquire()`; `next_delay(key)` and `reset(key)`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class TokenBucket:
    """A thread-safe token bucket: `rate` tokens per second, at most `burst` stored.

    A caller that finds the bucket empty takes a token "on credit" (the balance goes
    negative) and sleeps until it would have been refilled, outside the lock, so waiting
    callers are served in arrival order and never wake up together.
    """

    def __init__(
        self,
        *,
        rate: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("the cloud API rate must be positive and the burst at least 1")
        self._rate = rate
        self._burst = float(burst)
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._stamp = clock()

    def acquire(self) -> float:
        """Take one token, waiting if needed. Returns the time waited (for tests)."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
            self._stamp = now
            self._tokens -= 1.0
            wait = 0.0 if self._tokens >= 0 else -self._tokens / self._rate
        if wait > 0:
            self._sleep(wait)
        return wait


class Backoff:
    """Per key, a delay that grows with each try: `first`, then `factor` times the last, at
    most `maximum`; `reset(key)` starts the key over. Thread-safe."""

    def __init__(self, *, first: float, factor: float, maximum: float) -> None:
        self._first = first
        self._factor = factor
        self._maximum = maximum
        self._lock = threading.Lock()
        self._tries: dict[str, int] = {}

    def next_delay(self, key: str) -> float:
        """The delay before the next try of `key` (and one more try counted)."""
        with self._lock:
            tries = self._tries.get(key, 0)
            self._tries[key] = tries + 1
        return float(min(self._maximum, self._first * self._factor**tries))

    def reset(self, key: str) -> None:
        with self._lock:
            self._tries.pop(key, None)
