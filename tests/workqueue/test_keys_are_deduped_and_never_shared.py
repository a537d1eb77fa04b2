"""A key is handed out once however often it is added, and never to two threads at once; a key
added while it is being synced runs once more afterwards (client-go queue.go semantics)."""

from __future__ import annotations

import pytest

from pyccm.workers.runtime.queue import WorkQueue


def test_a_key_added_twice_is_handed_out_once(queue: WorkQueue[str]) -> None:
    queue.add("shop/web")
    queue.add("shop/web")
    assert len(queue) == 1
    assert queue.get(timeout=0) == "shop/web"
    assert queue.get(timeout=0) is None


def test_keys_are_handed_out_in_the_order_they_were_added(queue: WorkQueue[str]) -> None:
    for key in ("c", "a", "b", "a"):
        queue.add(key)
    assert [queue.get(timeout=0) for _ in range(3)] == ["c", "a", "b"]


def test_a_key_added_while_in_flight_is_not_handed_to_another_thread(
    queue: WorkQueue[str],
) -> None:
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    queue.add("a")
    queue.add("a")
    assert len(queue) == 0
    assert queue.get(timeout=0) is None


def test_a_key_added_while_in_flight_runs_once_more_after_done(queue: WorkQueue[str]) -> None:
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    queue.add("a")
    queue.add("a")
    queue.done("a")
    assert queue.get(timeout=0) == "a"
    queue.done("a")
    assert queue.get(timeout=0) is None


def test_a_key_not_added_again_is_not_run_again(queue: WorkQueue[str]) -> None:
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    queue.done("a")
    assert len(queue) == 0
    assert queue.get(timeout=0) is None


def test_other_keys_are_handed_out_while_one_is_in_flight(queue: WorkQueue[str]) -> None:
    queue.add("a")
    queue.add("b")
    assert queue.get(timeout=0) == "a"
    queue.add("a")
    assert queue.get(timeout=0) == "b"
    assert queue.get(timeout=0) is None


def test_done_for_a_key_that_was_not_handed_out_is_refused(queue: WorkQueue[str]) -> None:
    queue.add("a")
    with pytest.raises(ValueError, match="not being processed"):
        queue.done("a")
    with pytest.raises(ValueError, match="not being processed"):
        queue.done("never-added")
    # The refused call changed nothing: the key is still queued once.
    assert queue.get(timeout=0) == "a"
    assert queue.get(timeout=0) is None


def test_keys_added_later_wait_behind_every_other_key(queue: WorkQueue[str]) -> None:
    queue.add_later("verify-1")
    queue.add("new-1")
    queue.add_later("verify-2")
    queue.add("new-2")
    assert len(queue) == 4
    assert [queue.get(timeout=0) for _ in range(4)] == ["new-1", "new-2", "verify-1", "verify-2"]


def test_a_plain_add_moves_a_key_out_of_the_later_lane(queue: WorkQueue[str]) -> None:
    queue.add_later("a")
    queue.add_later("b")
    queue.add("c")
    queue.add("b")
    queue.add_later("c")
    assert len(queue) == 3
    assert [queue.get(timeout=0) for _ in range(3)] == ["c", "b", "a"]
    assert queue.get(timeout=0) is None
