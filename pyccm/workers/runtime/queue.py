"""The work queue each controller's sync threads pull object keys from.

It keeps client-go's rate-limited workqueue promises (`util/workqueue/queue.go`,
`delaying_queue.go`, `rate_limiting_queue.go`), which the controllers rely on to be
level-triggered (docs/architecture.md#style-keys-not-events):

* a key queued twice before a thread takes it is handed out once (dedupe);
* a key is never handed to two threads at once: a key added while a thread syncs it is marked
  dirty and queued again when that thread calls `done(key)`, so the change is never lost;
* `add_after(key, delay)` queues a key later; a key waiting with several delays keeps the
  earliest;
* `add_rate_limited(key)` is `add_after(key, limiter.when(key))`: a failure grows the key's
  backoff until `forget(key)`.

Two lanes. `add_later(key)` queues a key behind every key `add` queued, for work that only
verifies (a restarted service worker re-checks every converged Service): keys that may
need a change go first. `add` of a key waiting in the later lane moves it to the front lane.

Retry-after. When a sync raises the provider's `RetryAfter(delay)` (upstream's `api.RetryError`),
the runner calls `add_after(key, delay)`, **not** `add_rate_limited(key)`: the key comes back
after exactly the delay the cloud asked for, and its backoff history is neither grown nor reset
(upstream's service controller does the same). Like upstream's `AddAfter`, that still counts in
`workqueue_retries_total`.

Delays need no timer thread: the heap of waiting keys is moved into the queue by whichever thread
looks at it (`get()`, `len()`), and idle getters sleep exactly until the earliest waiting key is
due.

Shutdown. After `shutdown()` the queue hands out nothing: blocked and later `get()` calls return
`None` at once, and new adds are ignored. (Upstream keeps handing out keys already queued until
the queue is empty; we stop on leadership loss and SIGTERM, where more cloud calls are the wrong
thing and a restarted worker re-lists everything anyway.) `shutdown_with_drain()` also waits until
every key handed out has been `done()`.

Metrics are upstream's workqueue metrics (label `name` as upstream, plus `controller`), with types
that prometheus_client's multiprocess mode supports, because the manager serves all processes'
metrics in one scrape:

* `workqueue_depth` (gauge, `livesum`): keys waiting to be handed out, including keys that are
  dirty while a thread syncs them, as upstream. Service shards run a queue of the same name each;
  the sum over live processes is the controller's depth.
* `workqueue_unfinished_work_seconds` (gauge, `livesum`): summed age of the syncs in flight.
* `workqueue_longest_running_processor_seconds` (gauge, `livemax`): age of the oldest sync in
  flight. `livemax`, not `max`: a dead process's last value must not stick.
* `workqueue_adds_total`, `workqueue_retries_total` (counters) and
  `workqueue_queue_duration_seconds`, `workqueue_work_duration_seconds` (histograms with
  upstream's buckets, 10 ns to 10 s).

The in-flight gauges are refreshed on every `get()` and `done()`, and delayed keys are counted in
the depth once a thread looks at the queue. A hung sync does neither, and while every thread is
busy nobody looks, so the runner should call `refresh_metrics()` periodically (upstream refreshes
every 0.5 s).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import weakref
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from pyccm.workers.runtime.clock import MONOTONIC, Clock
from pyccm.workers.runtime.ratelimit import RateLimiter

K = TypeVar("K", bound=Hashable)

# Upstream's buckets for both duration histograms: 10 ns to 10 s, one per decade.
_DURATION_BUCKETS = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)
_LABELS = ("name", "controller")


@dataclass(frozen=True)
class _Families:
    """The metric families, registered once per registry and shared by every queue in it."""

    depth: Gauge
    adds: Counter
    queue_duration: Histogram
    work_duration: Histogram
    unfinished_work: Gauge
    longest_running: Gauge
    retries: Counter


def _register_families(registry: CollectorRegistry) -> _Families:
    return _Families(
        depth=Gauge(
            "workqueue_depth",
            "Current depth of workqueue",
            _LABELS,
            registry=registry,
            multiprocess_mode="livesum",
        ),
        adds=Counter(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            _LABELS,
            registry=registry,
        ),
        queue_duration=Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            _LABELS,
            registry=registry,
            buckets=_DURATION_BUCKETS,
        ),
        work_duration=Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            _LABELS,
            registry=registry,
            buckets=_DURATION_BUCKETS,
        ),
        unfinished_work=Gauge(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed "
            "by work_duration",
            _LABELS,
            registry=registry,
            multiprocess_mode="livesum",
        ),
        longest_running=Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            _LABELS,
            registry=registry,
            multiprocess_mode="livemax",
        ),
        retries=Counter(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            _LABELS,
            registry=registry,
        ),
    )


# A registry accepts each metric name once, but a process has several queues (the service worker has
# `service` and `node`). Families are therefore created once per registry and shared; weak keys let
# a test's throw-away registry go.
_FAMILIES: weakref.WeakKeyDictionary[CollectorRegistry, _Families] = weakref.WeakKeyDictionary()
_FAMILIES_LOCK = threading.Lock()


def _families(registry: CollectorRegistry) -> _Families:
    with _FAMILIES_LOCK:
        families = _FAMILIES.get(registry)
        if families is None:
            families = _FAMILIES[registry] = _register_families(registry)
        return families


class _QueueMetrics:
    """One queue's labelled children of the shared families."""

    def __init__(self, families: _Families, *, name: str, controller: str) -> None:
        labels = {"name": name, "controller": controller}
        self.depth = families.depth.labels(**labels)
        self.adds = families.adds.labels(**labels)
        self.queue_duration = families.queue_duration.labels(**labels)
        self.work_duration = families.work_duration.labels(**labels)
        self.unfinished_work = families.unfinished_work.labels(**labels)
        self.longest_running = families.longest_running.labels(**labels)
        self.retries = families.retries.labels(**labels)


class WorkQueue(Generic[K]):
    """A deduplicating, delaying, rate-limited queue of keys for a pool of sync threads.

    The loop of a sync thread::

        while (key := queue.get()) is not None:
            try:
                sync(key)
            except RetryAfter as err:
                queue.add_after(key, err.delay)   # the cloud's delay; backoff untouched
            except Exception:
                queue.add_rate_limited(key)       # grows the key's backoff
            else:
                queue.forget(key)                 # resets the key's backoff
            finally:
                queue.done(key)
    """

    def __init__(
        self,
        *,
        name: str,
        controller: str,
        rate_limiter: RateLimiter[K],
        clock: Clock = MONOTONIC,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.name = name
        self._rate_limiter = rate_limiter
        self._clock = clock
        self._metrics = _QueueMetrics(
            _families(REGISTRY if registry is None else registry), name=name, controller=controller
        )
        self._lock = threading.Lock()
        # Getters sleep on `_ready`; shutdown_with_drain() sleeps on `_idle`. One lock for both.
        self._ready = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)
        self._queue: deque[K] = deque()  # keys to hand out, in order; each is also in _dirty
        self._later: dict[K, None] = {}  # handed out when _queue is empty, in order; in _dirty
        self._dirty: dict[K, float] = {}  # keys that need a sync -> when they became dirty
        self._processing: dict[K, float] = {}  # keys handed out, not yet done -> when
        self._waiting: dict[K, tuple[float, int]] = {}  # delayed keys -> (due, heap entry id)
        self._heap: list[tuple[float, int, K]] = []  # (due, entry id, key); stale entries skipped
        self._entry_ids = itertools.count()
        self._shutting_down = False

    # -- adding -------------------------------------------------------------------------------

    def add(self, key: K) -> None:
        """Queue `key` now, unless it is already queued. Ignored after shutdown."""
        with self._lock:
            if self._shutting_down:
                return
            if key in self._later:
                del self._later[key]
                self._queue.append(key)
                return
            self._make_dirty(key, self._clock.now())

    def add_later(self, key: K) -> None:
        """Queue `key` behind every key `add` queued (or queues later), unless it is already
        queued. Ignored after shutdown."""
        with self._lock:
            if not self._shutting_down:
                self._make_dirty(key, self._clock.now(), later=True)

    def add_after(self, key: K, delay: float) -> None:
        """Queue `key` after `delay` seconds (at once if `delay <= 0`). A key already waiting keeps
        the earlier of its two due times. Counts a retry; does not touch the key's backoff."""
        with self._lock:
            if self._shutting_down:
                return
            self._metrics.retries.inc()
            now = self._clock.now()
            if delay <= 0:
                self._make_dirty(key, now)
                return
            due = now + delay
            current = self._waiting.get(key)
            if current is not None and current[0] <= due:
                return
            entry_id = next(self._entry_ids)
            self._waiting[key] = (due, entry_id)
            heapq.heappush(self._heap, (due, entry_id, key))
            if self._heap[0][1] == entry_id:
                # A new earliest due time: every idle getter must shorten its sleep, or the key
                # would wait until some getter's longer sleep ended.
                self._ready.notify_all()

    def add_rate_limited(self, key: K) -> None:
        """Queue `key` after the delay its rate limiter gives for one more failure."""
        self.add_after(key, self._rate_limiter.when(key))

    def forget(self, key: K) -> None:
        """`key` succeeded: reset its backoff. Does not remove it from the queue."""
        self._rate_limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        """How many failures of `key` its rate limiter remembers."""
        return self._rate_limiter.num_requeues(key)

    # -- taking -------------------------------------------------------------------------------

    def get(self, timeout: float | None = None) -> K | None:
        """Hand out the next key, blocking up to `timeout` seconds (forever if None). Returns None
        on timeout or shutdown; `shutting_down` tells which. The caller must call `done(key)`."""
        with self._lock:
            deadline = None if timeout is None else self._clock.now() + timeout
            while not self._shutting_down:
                now = self._clock.now()
                self._move_due_keys(now)
                if self._queue:
                    return self._hand_out(self._queue.popleft(), now)
                if self._later:
                    key = next(iter(self._later))
                    del self._later[key]
                    return self._hand_out(key, now)
                if deadline is not None and now >= deadline:
                    return None
                self._clock.wait(self._ready, self._sleep_time(now, deadline))
            return None

    def done(self, key: K) -> None:
        """The thread that got `key` has finished with it. If `key` was added meanwhile, it is
        queued again now. Calling it for a key that is not handed out is a bug: ValueError."""
        with self._lock:
            started = self._processing.pop(key, None)
            if started is None:
                raise ValueError(f"done() for a key that is not being processed: {key!r}")
            now = self._clock.now()
            self._metrics.work_duration.observe(now - started)
            self._update_in_flight_gauges(now)
            if key in self._dirty:
                self._queue.append(key)
                self._ready.notify()
            if not self._processing:
                self._idle.notify_all()

    def __len__(self) -> int:
        """Keys ready to be handed out (not those in flight or still delayed)."""
        with self._lock:
            self._move_due_keys(self._clock.now())
            return len(self._queue) + len(self._later)

    # -- stopping -----------------------------------------------------------------------------

    @property
    def shutting_down(self) -> bool:
        with self._lock:
            return self._shutting_down

    def shutdown(self) -> None:
        """Stop handing out keys: every blocked and future `get()` returns None; adds are ignored;
        queued and delayed keys are dropped. Keys in flight may still be `done()`."""
        with self._lock:
            self._shut_down()

    def shutdown_with_drain(self, timeout: float | None = None) -> bool:
        """`shutdown()`, then wait up to `timeout` seconds until every key handed out is `done()`.
        Returns whether that happened in time."""
        with self._lock:
            self._shut_down()
            deadline = None if timeout is None else self._clock.now() + timeout
            while self._processing:
                now = self._clock.now()
                if deadline is not None and now >= deadline:
                    return False
                self._clock.wait(self._idle, None if deadline is None else deadline - now)
            return True

    # -- metrics ------------------------------------------------------------------------------

    def refresh_metrics(self) -> None:
        """Bring the gauges up to date: count delayed keys that are due in the depth and refresh
        the in-flight ages. Call it periodically so that a hung sync shows up and keys that came
        due while every thread was busy are counted."""
        with self._lock:
            now = self._clock.now()
            self._move_due_keys(now)
            self._update_in_flight_gauges(now)

    # -- internals (the lock is held) -----------------------------------------------------------

    def _make_dirty(self, key: K, since: float, *, later: bool = False) -> None:
        if key in self._dirty:
            return
        self._dirty[key] = since
        self._metrics.adds.inc()
        self._metrics.depth.inc()
        # A key being synced runs again when its thread calls done(); queuing it now would let a
        # second thread take it while the first is still on it.
        if key not in self._processing:
            if later:
                self._later[key] = None
            else:
                self._queue.append(key)
            self._ready.notify()

    def _hand_out(self, key: K, now: float) -> K:
        self._metrics.depth.dec()
        self._metrics.queue_duration.observe(now - self._dirty.pop(key))
        self._processing[key] = now
        self._update_in_flight_gauges(now)
        return key

    def _move_due_keys(self, now: float) -> None:
        while self._heap and self._heap[0][0] <= now:
            due, entry_id, key = heapq.heappop(self._heap)
            # Entries replaced by an earlier due time stay in the heap; skip them.
            if self._waiting.get(key) == (due, entry_id):
                del self._waiting[key]
                # Queue time counts from when the key was due, not from when a thread noticed.
                self._make_dirty(key, due)

    def _sleep_time(self, now: float, deadline: float | None) -> float | None:
        wake_ups = [
            t for t in (deadline, self._heap[0][0] if self._heap else None) if t is not None
        ]
        return min(wake_ups) - now if wake_ups else None

    def _update_in_flight_gauges(self, now: float) -> None:
        ages = [now - started for started in self._processing.values()]
        self._metrics.unfinished_work.set(sum(ages))
        self._metrics.longest_running.set(max(ages, default=0.0))

    def _shut_down(self) -> None:
        self._shutting_down = True
        self._metrics.depth.dec(len(self._dirty))
        # Dropping the dirty marks too: a key in flight is not queued again by its done().
        self._dirty.clear()
        self._queue.clear()
        self._later.clear()
        self._waiting.clear()
        self._heap.clear()
        self._ready.notify_all()
