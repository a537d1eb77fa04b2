"""`add_rate_limited` backs a failing key off per its limiter; `forget` resets it; the retry-after
path (`add_after` with the cloud's delay) neither grows nor resets the backoff."""

from __future__ import annotations

from pyccm.workers.runtime.clock import FakeClock
from pyccm.workers.runtime.queue import WorkQueue


def fail(queue: WorkQueue[str], key: str) -> None:
    """One sync of `key` that fails: take it, requeue it rate-limited, finish."""
    assert queue.get(timeout=0) == key
    queue.add_rate_limited(key)
    queue.done(key)


def ready_after(queue: WorkQueue[str], clock: FakeClock, key: str) -> float:
    """How long (to 0.5 s) until `key` is handed out; steps the fake clock."""
    waited = 0.0
    while queue.get(timeout=0) != key:
        clock.advance(0.5)
        waited += 0.5
        assert waited <= 1000.0, "the key never came back"
    queue.done(key)
    queue.add(key)
    return waited


def test_each_failure_doubles_the_keys_delay(queue: WorkQueue[str], clock: FakeClock) -> None:
    queue.add("a")
    delays = []
    for _ in range(4):
        fail(queue, "a")
        delays.append(ready_after(queue, clock, "a"))
    assert delays == [5.0, 10.0, 20.0, 40.0]
    assert queue.num_requeues("a") == 4


def test_forget_resets_the_backoff(queue: WorkQueue[str], clock: FakeClock) -> None:
    queue.add("a")
    for _ in range(3):
        fail(queue, "a")
        ready_after(queue, clock, "a")
    queue.forget("a")
    assert queue.num_requeues("a") == 0
    fail(queue, "a")
    assert ready_after(queue, clock, "a") == 5.0


def test_backoff_is_per_key(queue: WorkQueue[str], clock: FakeClock) -> None:
    queue.add("a")
    for _ in range(3):
        fail(queue, "a")
        ready_after(queue, clock, "a")
    queue.add("b")
    assert queue.get(timeout=0) == "a"
    queue.done("a")
    fail(queue, "b")
    assert queue.num_requeues("b") == 1
    assert ready_after(queue, clock, "b") == 5.0


def test_retry_after_uses_the_clouds_delay_and_keeps_the_backoff(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add("a")
    fail(queue, "a")
    ready_after(queue, clock, "a")
    assert queue.get(timeout=0) == "a"
    queue.add_after("a", 30.0)  # what the runner does on RetryAfter(30)
    queue.done("a")
    assert ready_after(queue, clock, "a") == 30.0
    assert queue.num_requeues("a") == 1
    fail(queue, "a")
    assert ready_after(queue, clock, "a") == 10.0
