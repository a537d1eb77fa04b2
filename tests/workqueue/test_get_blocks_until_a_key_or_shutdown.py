"""`get()` blocks until a key is ready, its timeout passes (on the queue's clock) or the queue
shuts down; `shutdown_with_drain()` waits for the keys in flight."""

from __future__ import annotations

from pyccm.workers.runtime.clock import FakeClock
from pyccm.workers.runtime.queue import WorkQueue
from tests.support.waiting import Background


def test_a_blocked_get_returns_the_key_that_is_added(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    getter = Background(queue.get)
    assert clock.wait_for_sleepers(1)
    queue.add("a")
    assert getter.result() == "a"


def test_get_with_a_timeout_waits_for_the_whole_timeout(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    getter = Background(lambda: queue.get(timeout=5.0))
    assert clock.wait_for_sleepers(1)
    clock.advance(4.0)
    # Had the getter given up at 4 s it would have returned None, not this key.
    queue.add("a")
    assert getter.result() == "a"


def test_get_returns_none_when_its_timeout_passes(queue: WorkQueue[str], clock: FakeClock) -> None:
    getter = Background(lambda: queue.get(timeout=5.0))
    assert clock.wait_for_sleepers(1)
    clock.advance(5.0)
    assert getter.result() is None
    assert not queue.shutting_down


def test_shutdown_wakes_every_blocked_getter_with_none(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    getters = [Background(queue.get) for _ in range(3)]
    assert clock.wait_for_sleepers(3)
    queue.shutdown()
    assert [g.result() for g in getters] == [None, None, None]
    assert queue.shutting_down


def test_after_shutdown_nothing_is_handed_out_and_adds_are_ignored(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add("queued")
    queue.add_after("delayed", 1.0)
    queue.shutdown()
    queue.add("late")
    queue.add_after("late", 0.0)
    queue.add_rate_limited("late")
    clock.advance(10.0)
    assert queue.get() is None
    assert len(queue) == 0


def test_a_key_in_flight_at_shutdown_is_not_queued_again_by_done(
    queue: WorkQueue[str],
) -> None:
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    queue.add("a")
    queue.shutdown()
    queue.done("a")
    assert len(queue) == 0


def test_shutdown_with_drain_waits_until_keys_in_flight_are_done(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add("a")
    queue.add("b")
    assert queue.get(timeout=0) == "a"
    assert queue.get(timeout=0) == "b"
    drainer = Background(queue.shutdown_with_drain)
    assert clock.wait_for_sleepers(1)
    assert queue.get() is None
    queue.done("a")
    assert clock.wait_for_sleepers(1)
    assert not drainer.finished
    queue.done("b")
    assert drainer.result() is True


def test_shutdown_with_drain_gives_up_after_its_timeout(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    drainer = Background(lambda: queue.shutdown_with_drain(timeout=30.0))
    assert clock.wait_for_sleepers(1)
    clock.advance(30.0)
    assert drainer.result() is False


def test_shutdown_with_drain_returns_at_once_when_nothing_is_in_flight(
    queue: WorkQueue[str],
) -> None:
    queue.add("queued-but-never-taken")
    assert queue.shutdown_with_drain(timeout=0) is True
