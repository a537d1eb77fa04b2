"""`add_after(key, delay)` queues a key once its delay has passed on the queue's clock; a key
waiting with several delays keeps the earliest (client-go delaying_queue.go semantics)."""

from __future__ import annotations

from pyccm.workers.runtime.clock import FakeClock
from pyccm.workers.runtime.queue import WorkQueue
from tests.support.waiting import Background


def test_a_delayed_key_is_ready_only_when_its_delay_has_passed(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add_after("a", 10.0)
    assert len(queue) == 0
    clock.advance(9.5)
    assert queue.get(timeout=0) is None
    clock.advance(0.5)
    assert queue.get(timeout=0) == "a"


def test_a_delay_of_zero_or_less_queues_the_key_at_once(queue: WorkQueue[str]) -> None:
    queue.add_after("a", 0.0)
    queue.add_after("b", -1.0)
    assert [queue.get(timeout=0), queue.get(timeout=0)] == ["a", "b"]


def test_a_shorter_delay_added_later_wins(queue: WorkQueue[str], clock: FakeClock) -> None:
    queue.add_after("a", 10.0)
    queue.add_after("a", 3.0)
    clock.advance(3.0)
    assert queue.get(timeout=0) == "a"
    queue.done("a")
    # The 10 s entry was replaced, not kept: the key does not come back.
    clock.advance(10.0)
    assert queue.get(timeout=0) is None


def test_a_longer_delay_added_later_does_not_postpone_the_key(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add_after("a", 3.0)
    queue.add_after("a", 10.0)
    clock.advance(3.0)
    assert queue.get(timeout=0) == "a"
    queue.done("a")
    clock.advance(10.0)
    assert queue.get(timeout=0) is None


def test_delayed_keys_come_out_in_the_order_they_become_due(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add_after("late", 3.0)
    queue.add_after("early", 1.0)
    queue.add_after("middle", 2.0)
    clock.advance(5.0)
    assert [queue.get(timeout=0) for _ in range(3)] == ["early", "middle", "late"]


def test_a_delayed_key_that_is_already_queued_is_handed_out_once(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add("a")
    queue.add_after("a", 1.0)
    clock.advance(1.0)
    assert queue.get(timeout=0) == "a"
    assert queue.get(timeout=0) is None


def test_a_blocked_get_wakes_when_a_delayed_key_becomes_due(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add_after("slow", 100.0)
    getter = Background(queue.get)
    assert clock.wait_for_sleepers(1)
    # A key due earlier than the one the getter sleeps for must not wait for that one.
    queue.add_after("fast", 1.0)
    clock.advance(1.0)
    assert getter.result() == "fast"


def test_every_idle_getter_watches_the_earliest_delayed_key(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    getters = [Background(queue.get) for _ in range(2)]
    assert clock.wait_for_sleepers(2)
    queue.add_after("a", 1.0)
    queue.add_after("b", 2.0)
    clock.advance(2.0)
    assert sorted(str(g.result()) for g in getters) == ["a", "b"]
