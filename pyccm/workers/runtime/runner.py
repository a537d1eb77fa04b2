"""Runs one controller: replica changes → keys → N sync threads → results → acks.

A sync thread takes a key from the work queue (which guarantees one sync per key at a
time and re-runs a key that changed meanwhile), calls `controller.sync(key)`, sends the
returned actions to the manager and waits for its ack. The outcome decides the key's
fate: success forgets its backoff; `RetryAfter` comes back after exactly the delay asked
for (without growing the backoff); any other error, or an ack with a retryable failure,
goes through the controller's rate limiter. While the manager says "pause" (it is losing
or giving up the lease), no sync starts.

A controller's lanes (`Controller.lanes`) each get a queue and threads of their own: a key
goes to the lane whose prefix it starts with, else to the controller's main queue.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from prometheus_client import Counter, Histogram

from pyccm.protocol.messages import Action, Topic
from pyccm.provider.errors import RetryAfter
from pyccm.provider.interface import Capability
from pyccm.workers.runtime.commit import Committer, Submitter, needs_retry
from pyccm.workers.runtime.controller import Controller, Later, Obj, Periodic, SyncFailed
from pyccm.workers.runtime.queue import WorkQueue
from pyccm.workers.runtime.replica import Replica

log = logging.getLogger(__name__)

# How long a stopping worker lets its syncs in flight finish: under supervisord's patience,
# and within the 2 s a process may take to stop on SIGTERM, with room for the exit itself
# on a loaded machine (the fault suite measured 1.64 s end to end with a 1.5 s drain).
STOP_TIMEOUT = 1.0

SYNCS = Counter("pyccm_sync_total", "Syncs by controller and outcome.", ["controller", "outcome"])
SYNC_SECONDS = Histogram(
    "pyccm_sync_duration_seconds",
    "Time in controller.sync (cloud calls included, ack excluded).",
    ["controller"],
    buckets=(0.005, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)


@dataclass(frozen=True)
class RunnerSettings:
    workers: int = 1


class Runner:
    def __init__(
        self,
        *,
        controller: Controller,
        replica: Replica,
        transport: Submitter,
        settings: RunnerSettings,
        committer: Committer,
    ) -> None:
        self.controller = controller
        self._replica = replica
        self._transport = transport
        self._settings = settings
        self._commit = committer
        committer.attach(transport)
        self.queue = self._new_queue(controller.queue_name)
        # (prefix, queue, threads) of each lane, in the controller's order.
        self._lanes = [
            (lane.prefix, self._new_queue(lane.queue_name), lane.workers)
            for lane in controller.lanes
        ]
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        # One event per periodic that asks to be woken (`Periodic.wakes_on`).
        self._wakers: list[tuple[Periodic, threading.Event]] = []
        replica.listen(self._on_change)

    def _new_queue(self, name: str) -> WorkQueue[Hashable]:
        return WorkQueue(
            name=name, controller=self.controller.name, rate_limiter=self.controller.rate_limiter()
        )

    def _queues(self) -> list[WorkQueue[Hashable]]:
        return [self.queue, *(queue for _, queue, _ in self._lanes)]

    def _queue_for(self, key: str) -> WorkQueue[Hashable]:
        for prefix, queue, _ in self._lanes:
            if key.startswith(prefix):
                return queue
        return self.queue

    def _add(self, key: str) -> None:
        self._queue_for(key).add(key)

    def _refresh_metrics(self) -> None:
        for queue in self._queues():
            queue.refresh_metrics()

    def start(self) -> None:
        # The controller is given `enqueue` before any sync runs: a sync may rely on it.
        periodics = self.controller.periodics(self._add)
        pools = [(self.queue, self._settings.workers, "sync")]
        pools += [(queue, workers, prefix.strip("/")) for prefix, queue, workers in self._lanes]
        for queue, workers, pool in pools:
            for index in range(workers):
                work = functools.partial(self._work, queue)
                self._spawn(f"{self.controller.name}-{pool}-{index}", work)
        # Upstream refreshes the in-flight gauges every 0.5 s, so a hung sync shows up.
        gauges = Periodic(name="queue-metrics", period=0.5, run=self._refresh_metrics)
        for periodic in [gauges, *periodics]:
            wake = threading.Event()
            self._wakers.append((periodic, wake))
            self._spawn(
                f"{self.controller.name}-{periodic.name}",
                functools.partial(self._every, periodic, wake),
            )

    def wake(self, capabilities: frozenset[Capability]) -> None:
        """Run now the periodics that asked to follow these capabilities' settings (a
        reload of the cloud configuration changed them)."""
        for periodic, wake in self._wakers:
            if periodic.wakes_on & capabilities:
                log.info(
                    "%s: running %s now for the new cloud settings",
                    self.controller.name,
                    periodic.name,
                )
                wake.set()

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Let the syncs in flight finish for at most `timeout` seconds in all, then leave
        them: the threads are daemons and die with the process. Abandoning a cloud call is
        safe because every sync is level-triggered and looks before it creates (a load
        balancer is found by name, a route by the router's list), so the restarted worker
        carries on from the cloud's state; waiting longer got the worker SIGKILLed."""
        deadline = time.monotonic() + timeout
        self._stop.set()
        for _, wake in self._wakers:
            wake.set()
        # Every queue stops handing out keys before any is waited for.
        for queue in self._queues():
            queue.shutdown()
        drained = [
            queue.shutdown_with_drain(max(0.0, deadline - time.monotonic()))
            for queue in self._queues()
        ]
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if not all(drained):
            log.warning(
                "%s: stopping with syncs in flight; they resume from the cloud's state",
                self.controller.name,
            )

    def _spawn(self, name: str, target: Callable[[], object]) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _on_change(self, topic: Topic, key: str, old: Obj | None, new: Obj | None) -> None:
        for queued in self.controller.keys_for(topic, key, old, new):
            if isinstance(queued, Later):
                self._queue_for(queued).add_later(str(queued))
            else:
                self._add(queued)

    def _every(self, periodic: Periodic, wake: threading.Event) -> None:
        # The first run waits for the replica so it does not act on an empty cache.
        while not self._replica.synced.wait(0.5):
            if self._stop.is_set():
                return
        while not self._stop.is_set():
            try:
                periodic.run()
            except Exception:
                log.exception("%s: periodic %s failed", self.controller.name, periodic.name)
            # Cleared after the wait: a wake that arrives during a run makes one more run,
            # which starts after the new settings are in force.
            wake.wait(periodic.period)
            wake.clear()

    def _work(self, queue: WorkQueue[Hashable]) -> None:
        while (key := queue.get()) is not None:
            try:
                self._wait_while_paused()
                self._process(str(key), queue)
            finally:
                queue.done(key)

    def _wait_while_paused(self) -> None:
        """While the manager pauses this worker, or its replica is out of date (waiting for a
        new manager's snapshot), a sync would act on a stale view: wait."""
        while not self._stop.is_set() and (
            self._transport.paused.is_set() or not self._replica.synced.is_set()
        ):
            time.sleep(0.1)

    def _process(self, key: str, queue: WorkQueue[Hashable]) -> None:
        name = self.controller.name
        started = time.monotonic()
        try:
            actions = self.controller.sync(key)
        except SyncFailed as failed:
            SYNCS.labels(controller=name, outcome="error").inc()
            log.warning("%s: sync of %s failed: %s", name, key, failed)
            if failed.actions:
                self._deliver(key, failed.actions)
            queue.add_rate_limited(key)
            return
        except RetryAfter as retry:
            SYNCS.labels(controller=name, outcome="retry_after").inc()
            queue.add_after(key, retry.delay)
            return
        except Exception as error:
            SYNCS.labels(controller=name, outcome="error").inc()
            log.warning("%s: sync of %s failed: %s", name, key, error)
            queue.add_rate_limited(key)
            return
        finally:
            SYNC_SECONDS.labels(controller=name).observe(time.monotonic() - started)
        if actions and not self._deliver(key, actions):
            SYNCS.labels(controller=name, outcome="write_failed").inc()
            queue.add_rate_limited(key)
            return
        SYNCS.labels(controller=name, outcome="ok").inc()
        queue.forget(key)

    def _deliver(self, key: str, actions: tuple[Action, ...]) -> bool:
        """Send the actions; True when nothing is left that a retry could fix."""
        return not needs_retry(self._commit(key, actions))
