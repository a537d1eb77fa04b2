"""Rate limiters for the work queue: how long a key waits before it is retried.

They mirror client-go's `util/workqueue/default_rate_limiters.go` so that each controller retries
with upstream's numbers (tests/workqueue/README.md has them beside the queues):

* cloud-node (queue `Nodes`): `default_controller_rate_limiter()`, the larger of a per-key
  exponential backoff (5 ms doubling to 1000 s) and an overall token bucket (10 qps, burst 100);
* service (queues `service` and `node`): `service_controller_rate_limiter()`, per-key exponential
  only (5 s doubling to 300 s);
* route in watch mode (queue `Routes`): `route_controller_rate_limiter()`, a token bucket of one
  run per 10 s, burst 1, with the wait capped at 10 s.

A limiter answers three questions about a key: `when(key)` (how long to wait before the next
retry; it *records* a failure, so ask once per failure), `forget(key)` (the key succeeded: reset
its history) and `num_requeues(key)`. Limiters compose: `MaxOf` waits for the slowest of several,
`CappedWait` bounds one.

A cloud that says "retry after N seconds" (the provider's `RetryAfter(delay)`, upstream's
`api.RetryError`) does not go through a limiter at all: the runner calls `queue.add_after(key,
delay)`, which neither counts a failure nor grows the key's backoff. See
`workers/runtime/queue.py`.

Every limiter is thread-safe: sync threads report failures concurrently.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from pyccm.pacing import Backoff, TokenBucket
from pyccm.workers.runtime.clock import MONOTONIC, Clock

K = TypeVar("K", bound=Hashable)
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)


class RateLimiter(Protocol[K_contra]):
    """How long a failed key waits before it is retried."""

    def when(self, key: K_contra) -> float:
        """Record one more failure of `key` and return the delay (seconds) before its retry."""
        ...

    def forget(self, key: K_contra) -> None:
        """`key` succeeded (or was dropped): forget its failures."""
        ...

    def num_requeues(self, key: K_contra) -> int:
        """How many failures of `key` are remembered."""
        ...


class ItemExponentialRateLimiter(Generic[K]):
    """Per-key exponential backoff: `base * 2**failures`, capped at `cap` (client-go's
    ItemExponentialFailureRateLimiter), on the one backoff (`pyccm.pacing.Backoff`)."""

    def __init__(self, *, base: float, cap: float) -> None:
        self._backoff = Backoff(base=base, cap=cap)

    def when(self, key: K) -> float:
        return self._backoff.next(key)

    def forget(self, key: K) -> None:
        self._backoff.reset(key)

    def num_requeues(self, key: K) -> int:
        return self._backoff.failures(key)


class TokenBucketRateLimiter:
    """An overall limit on retries, whatever the key: `qps` tokens per second, at most `burst`
    saved up (client-go's BucketRateLimiter), on the one token bucket (`pyccm.pacing`).

    Each `when()` reserves a token *now* and returns how long until that token exists, so the
    bucket may go into debt: retries are spread out at `qps` instead of being refused. It keeps no
    per-key state, so `forget()` does nothing and `num_requeues()` is always 0, as upstream.
    """

    def __init__(self, *, qps: float, burst: int, clock: Clock = MONOTONIC) -> None:
        self._bucket = TokenBucket(rate=qps, burst=burst, clock=clock.now)

    def when(self, key: object) -> float:
        return self._bucket.reserve()

    def forget(self, key: object) -> None:
        return

    def num_requeues(self, key: object) -> int:
        return 0


class MaxOf(Generic[K]):
    """Wait for the slowest of several limiters (client-go's MaxOfRateLimiter). Every limiter
    sees every failure, so each keeps its own history."""

    def __init__(self, *limiters: RateLimiter[K]) -> None:
        if not limiters:
            raise ValueError("MaxOf needs at least one limiter")
        self._limiters = limiters

    def when(self, key: K) -> float:
        # A list, not a generator: every limiter must record the failure, not only up to the max.
        return max([limiter.when(key) for limiter in self._limiters])

    def forget(self, key: K) -> None:
        for limiter in self._limiters:
            limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        return max(limiter.num_requeues(key) for limiter in self._limiters)


class CappedWait(Generic[K]):
    """Never wait longer than `cap`, whatever the inner limiter says (client-go's
    WithMaxWaitRateLimiter). The route controller uses it so a node change is never delayed by more
    than 10 s."""

    def __init__(self, inner: RateLimiter[K], *, cap: float) -> None:
        if cap < 0:
            raise ValueError(f"need cap >= 0, got {cap}")
        self._inner = inner
        self._cap = cap

    def when(self, key: K) -> float:
        return min(self._inner.when(key), self._cap)

    def forget(self, key: K) -> None:
        self._inner.forget(key)

    def num_requeues(self, key: K) -> int:
        return self._inner.num_requeues(key)


def default_controller_rate_limiter(*, clock: Clock = MONOTONIC) -> MaxOf[Hashable]:
    """client-go's DefaultControllerRateLimiter, used by the cloud-node controller's `Nodes` queue:
    per key 5 ms doubling to 1000 s, and overall at most 10 retries/s after a burst of 100."""
    return MaxOf[Hashable](
        ItemExponentialRateLimiter(base=0.005, cap=1000.0),
        TokenBucketRateLimiter(qps=10.0, burst=100, clock=clock),
    )


def service_controller_rate_limiter() -> ItemExponentialRateLimiter[Hashable]:
    """The service controller's limiter for its `service` and `node` queues: per key only, 5 s
    doubling to 300 s (upstream's minRetryDelay/maxRetryDelay); no overall bucket."""
    return ItemExponentialRateLimiter(base=5.0, cap=300.0)


def route_controller_rate_limiter(*, clock: Clock = MONOTONIC) -> CappedWait[Hashable]:
    """The route controller's `Routes` queue in watch mode: at most one reconcile per 10 s
    (burst 1), and no change waits more than 10 s."""
    return CappedWait[Hashable](TokenBucketRateLimiter(qps=0.1, burst=1, clock=clock), cap=10.0)
