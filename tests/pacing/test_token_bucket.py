"""pyccm.pacing.TokenBucket on a fake clock: the burst, the rate, refilling up to the burst,
waiters served in turn, the non-blocking forms and the deadline. Time moves only when a
test (or the bucket's sleep) moves it."""

from __future__ import annotations

import threading

import pytest

from pyccm.pacing import TokenBucket
from tests.support.fake_time import FakeTime


def bucket(time: FakeTime, *, rate: float, burst: int) -> TokenBucket:
    return TokenBucket(rate=rate, burst=burst, clock=time.clock, sleep=time.sleep)


def test_a_full_bucket_lets_the_burst_through_then_paces_at_the_rate() -> None:
    time = FakeTime()
    limiter = bucket(time, rate=2.0, burst=3)

    waits = [limiter.acquire() for _ in range(6)]

    assert waits == pytest.approx([0.0, 0.0, 0.0, 0.5, 0.5, 0.5])
    assert time.slept == pytest.approx([0.5, 0.5, 0.5])
    assert time.now == pytest.approx(101.5)


def test_an_idle_bucket_refills_but_never_above_the_burst() -> None:
    time = FakeTime()
    limiter = bucket(time, rate=1.0, burst=2)
    limiter.acquire()
    limiter.acquire()

    time.now += 3600.0

    assert [limiter.acquire() for _ in range(3)] == pytest.approx([0.0, 0.0, 1.0])


def test_a_partly_refilled_token_costs_only_the_rest_of_its_period() -> None:
    time = FakeTime()
    limiter = bucket(time, rate=4.0, burst=1)
    limiter.acquire()

    time.now += 0.1

    assert limiter.acquire() == pytest.approx(0.15)


def test_reservations_queue_on_credit_one_period_apart() -> None:
    # The work queue's retry limit (client-go's 10 qps, burst 100) asks without sleeping: each
    # reservation is due one period after the last, so callers never wake up together.
    time = FakeTime()
    limiter = bucket(time, rate=10.0, burst=100)

    assert [limiter.reserve() for _ in range(100)] == [0.0] * 100
    assert [limiter.reserve() for _ in range(3)] == pytest.approx([0.1, 0.2, 0.3])
    assert time.slept == []
    time.now += 0.3
    assert limiter.reserve() == pytest.approx(0.1)


def test_try_acquire_takes_a_free_token_and_leaves_an_empty_bucket_alone() -> None:
    time = FakeTime()
    limiter = bucket(time, rate=1.0, burst=2)

    assert [limiter.try_acquire() for _ in range(3)] == [True, True, False]
    # The refusal took nothing on credit: half a period later there is still no token,
    # a whole period later there is exactly one.
    time.now += 0.5
    assert limiter.try_acquire() is False
    time.now += 0.5
    assert [limiter.try_acquire(), limiter.try_acquire()] == [True, False]
    assert time.slept == []


def test_a_token_due_after_the_deadline_is_not_taken() -> None:
    time = FakeTime()
    limiter = bucket(time, rate=1.0, burst=1)
    limiter.acquire()

    with pytest.raises(TimeoutError, match=r"due in 1\.000s"):
        limiter.acquire(deadline=time.now + 0.5)
    assert time.slept == []
    # Nothing was taken on credit: the next token is still one period away, and a deadline
    # that allows it waits for it.
    assert limiter.acquire(deadline=time.now + 1.0) == pytest.approx(1.0)
    assert time.now == pytest.approx(101.0)


def test_a_free_token_meets_any_deadline_not_yet_past() -> None:
    time = FakeTime()
    limiter = bucket(time, rate=1.0, burst=1)

    assert limiter.acquire(deadline=time.now) == 0.0


def test_threads_taking_at_once_are_spread_one_period_apart() -> None:
    # Eight threads reserve at the same instant of a frozen clock: every one gets its own slot.
    time = FakeTime()
    limiter = bucket(time, rate=2.0, burst=1)
    waits: list[float] = []
    lock = threading.Lock()

    def take() -> None:
        wait = limiter.reserve()
        with lock:
            waits.append(wait)

    threads = [threading.Thread(target=take) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)

    assert sorted(waits) == pytest.approx([0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5])


@pytest.mark.parametrize(("rate", "burst"), [(0.0, 1), (-1.0, 1), (1.0, 0)])
def test_a_bucket_that_could_never_give_a_token_is_refused(rate: float, burst: int) -> None:
    with pytest.raises(ValueError, match="need rate > 0 and burst >= 1"):
        TokenBucket(rate=rate, burst=burst)
