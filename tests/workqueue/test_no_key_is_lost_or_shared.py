"""Whatever the interleaving of add, add_after, get and done, no key is handed to two threads at
once and no add is lost: a model-based hypothesis test on a fake clock, and the same promise
checked with real threads."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Hashable

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from prometheus_client import CollectorRegistry

from pyccm.workers.runtime.clock import MONOTONIC, FakeClock
from pyccm.workers.runtime.queue import WorkQueue
from pyccm.workers.runtime.ratelimit import ItemExponentialRateLimiter
from tests.support.workqueue import CONTROLLER, NAME

KEYS = st.sampled_from(["a", "b", "c", "d"])


class QueueModel(RuleBasedStateMachine):
    """Tracks which keys the queue owes a sync: added (or due) since they were last handed out."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.registry = CollectorRegistry()
        self.queue = WorkQueue[str](
            name=NAME,
            controller=CONTROLLER,
            rate_limiter=ItemExponentialRateLimiter[Hashable](base=1.0, cap=4.0),
            clock=self.clock,
            registry=self.registry,
        )
        self.owed: set[str] = set()
        self.in_flight: set[str] = set()
        self.delayed: dict[str, float] = {}  # key -> earliest due time

    @rule(key=KEYS)
    def add(self, key: str) -> None:
        self.queue.add(key)
        self.owed.add(key)

    @rule(key=KEYS, delay=st.sampled_from([0.0, 1.0, 2.5]))
    def add_after(self, key: str, delay: float) -> None:
        self.queue.add_after(key, delay)
        if delay <= 0:
            self.owed.add(key)
        else:
            due = self.clock.now() + delay
            self.delayed[key] = min(due, self.delayed.get(key, due))

    @rule(key=KEYS)
    def add_rate_limited(self, key: str) -> None:
        delay = self.queue.num_requeues(key)  # base 1 s doubling: the next delay is 2**n s
        self.queue.add_rate_limited(key)
        due = self.clock.now() + min(2.0**delay, 4.0)
        self.delayed[key] = min(due, self.delayed.get(key, due))

    @rule(seconds=st.sampled_from([0.5, 1.0, 3.0]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        for key, due in list(self.delayed.items()):
            if due <= self.clock.now():
                self.owed.add(key)
                del self.delayed[key]

    @rule()
    def get(self) -> None:
        key = self.queue.get(timeout=0)
        if key is None:
            assert self.owed <= self.in_flight, "a key is owed a sync but was not handed out"
            return
        assert key not in self.in_flight, "a key was handed to a second thread"
        assert key in self.owed, "a key was handed out that nobody added"
        self.owed.discard(key)
        self.in_flight.add(key)

    @precondition(lambda self: bool(self.in_flight))
    @rule(pick=st.integers(min_value=0, max_value=3))
    def done(self, pick: int) -> None:
        key = sorted(self.in_flight)[pick % len(self.in_flight)]
        self.queue.done(key)
        self.in_flight.discard(key)

    @invariant()
    def ready_keys_are_the_owed_keys_not_in_flight(self) -> None:
        assert len(self.queue) == len(self.owed - self.in_flight)

    @invariant()
    def depth_counts_every_owed_key_after_a_refresh(self) -> None:
        self.queue.refresh_metrics()
        labels = {"name": NAME, "controller": CONTROLLER}
        depth = self.registry.get_sample_value("workqueue_depth", labels) or 0.0
        assert depth == len(self.owed)


TestQueueModel = QueueModel.TestCase
TestQueueModel.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


def test_threads_never_share_a_key_and_always_see_the_last_add() -> None:
    """Four sync threads against a stream of adds: no key is synced by two threads at once, and
    every key's last sync starts after its last add (the level-triggered promise)."""
    queue = WorkQueue[str](
        name=NAME,
        controller=CONTROLLER,
        rate_limiter=ItemExponentialRateLimiter[Hashable](base=1.0, cap=1.0),
        clock=MONOTONIC,
        registry=CollectorRegistry(),
    )
    lock = threading.Condition()
    version: dict[str, int] = {}  # key -> how many times it was added
    seen: dict[str, int] = {}  # key -> the version the latest sync started from
    in_flight: set[str] = set()
    overlaps: list[str] = []

    def sync_thread() -> None:
        while (key := queue.get()) is not None:
            with lock:
                if key in in_flight:
                    overlaps.append(key)
                in_flight.add(key)
                seen[key] = version[key]
            # Give up the GIL mid-sync so that adds land while keys are in flight.
            time.sleep(0)
            with lock:
                in_flight.discard(key)
                lock.notify_all()
            queue.done(key)

    threads = [threading.Thread(target=sync_thread, daemon=True) for _ in range(4)]
    # Switch threads often, so that many interleavings happen in a short run.
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        for thread in threads:
            thread.start()
        keys = [f"k{i}" for i in range(20)]
        for i in range(5000):
            key = keys[(i * 7) % len(keys)]
            with lock:
                version[key] = version.get(key, 0) + 1
            queue.add(key)
        with lock:
            caught_up = lock.wait_for(lambda: seen == version, timeout=30.0)
    finally:
        sys.setswitchinterval(switch_interval)
        queue.shutdown()
    for thread in threads:
        thread.join(10.0)
    assert caught_up, "some key's last add was never synced"
    assert overlaps == []
