"""How fast to go and how long to wait: the one token bucket and the one backoff of pyccm.

`TokenBucket` is `rate` tokens a second with at most `burst` saved up (golang.org/x/time/rate's
limiter, as client-go uses it); `Backoff` is an exponential delay, counted per key, with
optional jitter. Who uses them: docs/architecture.md#pacing.

Both read time from a clock function (`time.monotonic` unless told) and only
`TokenBucket.acquire` sleeps, so that tests can own time. The standard library only: every
layer may import this module. Both are thread-safe. Neither needs a thread of its own, and an
asyncio task uses `await asyncio.sleep(bucket.reserve())` instead of the blocking `acquire`.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable, Hashable

Clock = Callable[[], float]


class TokenBucket:
    """`rate` tokens per second, at most `burst` stored; the bucket starts full.

    A caller that finds the bucket empty takes its token on credit (the balance goes negative)
    and waits until the token would have been refilled, outside the lock: waiting callers are
    served in arrival order, one `1 / rate` apart, and never wake up together.
    """

    def __init__(
        self,
        *,
        rate: float,
        burst: int,
        clock: Clock = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"need rate > 0 and burst >= 1, got rate={rate} burst={burst}")
        self._rate = rate
        self._burst = float(burst)
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._stamp = clock()

    def reserve(self) -> float:
        """Take one token now, on credit if none is left, and return the seconds until it is
        due (0.0 when one was free). Never blocks and never refuses: the caller waits."""
        with self._lock:
            wait = self._wait_for_one(self._clock())
            self._tokens -= 1.0
        return wait

    def try_acquire(self) -> bool:
        """Take one token if one is free now; otherwise take nothing and return False."""
        with self._lock:
            if self._wait_for_one(self._clock()) > 0:
                return False
            self._tokens -= 1.0
        return True

    def acquire(self, deadline: float | None = None) -> float:
        """Take one token, sleeping until it is due, and return the seconds waited.

        With a `deadline` (a time on the bucket's clock) a token that would not be due by then
        is not taken: `TimeoutError`, and the bucket is as it was.
        """
        with self._lock:
            now = self._clock()
            wait = self._wait_for_one(now)
            if deadline is not None and now + wait > deadline:
                raise TimeoutError(f"no token before the deadline: the next is due in {wait:.3f}s")
            self._tokens -= 1.0
        if wait > 0:
            self._sleep(wait)
        return wait

    def _wait_for_one(self, now: float) -> float:
        """Refill for the time since the last look (never above burst); how long until one
        more token is due. The lock is held."""
        self._tokens = min(self._burst, self._tokens + max(0.0, now - self._stamp) * self._rate)
        self._stamp = max(self._stamp, now)
        return 0.0 if self._tokens >= 1.0 else (1.0 - self._tokens) / self._rate


class Backoff:
    """Exponential backoff, counted per key: after `n` failures of a key its next delay is
    `base * factor**n`, at most `cap`.

    `jitter=(low, high)` multiplies each delay by a random factor between `low` and `high`
    (the result still at most `cap`); (1.0, 1.0), the default, is no jitter. A user with one
    sequence of attempts leaves the key out (None). Thread-safe.
    """

    def __init__(
        self,
        *,
        base: float,
        cap: float,
        factor: float = 2.0,
        jitter: tuple[float, float] = (1.0, 1.0),
        rand: Callable[[], float] = random.random,
    ) -> None:
        if not 0 < base <= cap or math.isinf(cap):
            raise ValueError(f"need 0 < base <= cap < inf, got base={base} cap={cap}")
        if factor <= 1:
            raise ValueError(f"need factor > 1, got factor={factor}")
        low, high = jitter
        if not 0 < low <= high:
            raise ValueError(f"need 0 < low <= high in jitter, got jitter={jitter}")
        self._base = base
        self._cap = cap
        self._factor = factor
        self._jitter = jitter
        self._rand = rand
        # From this many failures on, base * factor**n is at or above the cap: the exponent
        # stops there, so that a key that failed a million times costs no overflow.
        self._max_exponent = math.ceil(math.log(cap / base, factor)) + 1
        self._failures: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def next(self, key: Hashable = None) -> float:
        """Count one more failure of `key` and return the delay (seconds) before its retry."""
        with self._lock:
            exponent = self._failures.get(key, 0)
            self._failures[key] = exponent + 1
        delay = min(self._cap, self._base * self._factor ** min(exponent, self._max_exponent))
        low, high = self._jitter
        if high > low:
            delay = min(self._cap, delay * (low + (high - low) * self._rand()))
        return delay

    def reset(self, key: Hashable = None) -> None:
        """`key` succeeded (or was dropped): its next delay is `base` again."""
        with self._lock:
            self._failures.pop(key, None)

    def failures(self, key: Hashable = None) -> int:
        """How many failures of `key` are counted since its last reset."""
        with self._lock:
            return self._failures.get(key, 0)
