"""The limiters give client-go's delays, and each controller's limiter has upstream's numbers
(tests/workqueue/README.md)."""

from __future__ import annotations

from collections.abc import Callable, Hashable

import pytest

from pyccm.workers.runtime.clock import FakeClock
from pyccm.workers.runtime.ratelimit import (
    CappedWait,
    ItemExponentialRateLimiter,
    MaxOf,
    TokenBucketRateLimiter,
    default_controller_rate_limiter,
    route_controller_rate_limiter,
    service_controller_rate_limiter,
)


def delays(limiter: ItemExponentialRateLimiter[Hashable], key: str, n: int) -> list[float]:
    return [limiter.when(key) for _ in range(n)]


def test_exponential_backoff_doubles_from_base_up_to_cap() -> None:
    limiter = ItemExponentialRateLimiter[Hashable](base=1.0, cap=10.0)
    assert delays(limiter, "a", 6) == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert limiter.num_requeues("a") == 6


def test_exponential_backoff_stays_at_the_cap_after_very_many_failures() -> None:
    limiter = ItemExponentialRateLimiter[Hashable](base=0.005, cap=1000.0)
    assert delays(limiter, "a", 2000)[-1] == 1000.0


def test_exponential_backoff_is_per_key_and_forget_resets_one_key() -> None:
    limiter = ItemExponentialRateLimiter[Hashable](base=1.0, cap=100.0)
    delays(limiter, "a", 3)
    delays(limiter, "b", 2)
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == 1.0
    assert limiter.when("b") == 4.0


def test_service_controller_backs_off_from_5_s_to_300_s() -> None:
    limiter = service_controller_rate_limiter()
    assert delays(limiter, "shop/web", 8) == [5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 300.0, 300.0]


def test_token_bucket_lets_a_burst_through_then_spaces_retries_at_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucketRateLimiter(qps=10.0, burst=100, clock=clock)
    assert [bucket.when(f"k{i}") for i in range(100)] == [0.0] * 100
    assert [bucket.when(f"x{i}") for i in range(3)] == pytest.approx([0.1, 0.2, 0.3])
    assert bucket.num_requeues("x0") == 0


def test_token_bucket_refills_with_time_up_to_its_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucketRateLimiter(qps=1.0, burst=2, clock=clock)
    assert [bucket.when("a"), bucket.when("a")] == [0.0, 0.0]
    clock.advance(1.0)
    assert bucket.when("a") == 0.0
    assert bucket.when("a") == pytest.approx(1.0)
    clock.advance(3600.0)
    assert [bucket.when("a"), bucket.when("a")] == [0.0, 0.0]
    assert bucket.when("a") == pytest.approx(1.0)


def test_node_controller_limiter_is_the_slower_of_backoff_and_bucket() -> None:
    clock = FakeClock()
    limiter = default_controller_rate_limiter(clock=clock)
    # Per key: 5 ms doubling (the bucket's burst of 100 is not used up yet).
    assert [limiter.when("n1") for _ in range(3)] == [0.005, 0.01, 0.02]
    # Overall: after 100 retries in all, the bucket's 10 qps is slower than a fresh key's 5 ms.
    for i in range(97):
        limiter.when(f"other{i}")
    assert limiter.when("n2") == pytest.approx(0.1)
    # And the per-key backoff is capped at 1000 s.
    assert max(limiter.when("n1") for _ in range(40)) == 1000.0


def test_max_of_remembers_the_highest_count_and_forget_reaches_every_limiter() -> None:
    fast = ItemExponentialRateLimiter[Hashable](base=1.0, cap=1000.0)
    slow = ItemExponentialRateLimiter[Hashable](base=3.0, cap=1000.0)
    limiter = MaxOf[Hashable](fast, slow)
    assert [limiter.when("a") for _ in range(3)] == [3.0, 6.0, 12.0]
    assert limiter.num_requeues("a") == 3
    limiter.forget("a")
    assert (fast.num_requeues("a"), slow.num_requeues("a")) == (0, 0)


def test_route_controller_runs_at_most_every_10_s_and_never_waits_longer() -> None:
    clock = FakeClock()
    limiter = route_controller_rate_limiter(clock=clock)
    assert limiter.when("routes") == 0.0
    assert limiter.when("routes") == pytest.approx(10.0)
    # The bucket is 20 s in debt now, but a change never waits more than 10 s.
    assert limiter.when("routes") == 10.0


def test_capped_wait_caps_the_inner_delay() -> None:
    limiter = CappedWait[Hashable](ItemExponentialRateLimiter(base=4.0, cap=100.0), cap=10.0)
    assert [limiter.when("a") for _ in range(3)] == [4.0, 8.0, 10.0]
    assert limiter.num_requeues("a") == 3
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0


@pytest.mark.parametrize(
    "build",
    [
        lambda: ItemExponentialRateLimiter[Hashable](base=0.0, cap=1.0),
        lambda: ItemExponentialRateLimiter[Hashable](base=2.0, cap=1.0),
        lambda: TokenBucketRateLimiter(qps=0.0, burst=1),
        lambda: TokenBucketRateLimiter(qps=1.0, burst=0),
        MaxOf[Hashable],
        lambda: CappedWait[Hashable](service_controller_rate_limiter(), cap=-1.0),
    ],
    ids=["zero-base", "cap-below-base", "zero-qps", "zero-burst", "no-limiters", "negative-cap"],
)
def test_nonsensical_limiter_settings_are_refused(build: Callable[[], object]) -> None:
    with pytest.raises(ValueError, match="need"):
        build()
