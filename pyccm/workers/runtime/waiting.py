"""Says what a worker is waiting for from its manager, and where, for as long as it waits.

A worker on the bus can do nothing before its manager answers: the cluster id first (the
service and route workers), then a snapshot of its replica. A manager that does not answer
(not started yet, another --runtime-dir or --bus-router, a CURVE key it refuses, a standby
that does not lead) must not make the worker look hung. Once it has waited `first_after`
seconds the worker logs one line naming what it waits for and the manager's address, and
again every `every` seconds: not once (it scrolls away) and not at every retry (a line a
second). Meanwhile `pyccm_worker_waiting_for_manager{worker}` is 1: in one pod every
process's metrics are in the manager's /metrics (PROMETHEUS_MULTIPROC_DIR), so the tree's
scrape shows which worker waits even when the bus is what is broken.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import Gauge

log = logging.getLogger(__name__)

WAITING = Gauge(
    "pyccm_worker_waiting_for_manager",
    "1 while this worker has waited over a few seconds for its manager (the cluster id, or "
    "a snapshot of its replica); its log names what it waits for and the address.",
    ["worker"],
    multiprocess_mode="livemax",
)


@dataclass(frozen=True)
class WaitSettings:
    # A manager that answers at all answers within a heartbeat or two; a normal start or a
    # failover never waits this long, so the line means something is wrong or still starting.
    first_after: float = 3.0
    # Often enough to be seen in a log tail, rare enough not to bury the other lines.
    every: float = 15.0


class ManagerWait:
    """One wait at a time: `tick` while waiting (as often as the caller likes), `end` when
    the answer came. Used by one thread."""

    def __init__(
        self,
        *,
        worker: str,
        settings: WaitSettings = WaitSettings(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._clock = clock
        self._gauge = WAITING.labels(worker=worker)
        self._gauge.set(0)
        self._since: float | None = None
        self._next_line = 0.0
        self._reported = False

    @property
    def active(self) -> bool:
        """A wait is under way (begun and not ended), reported or not yet."""
        return self._since is not None

    def begin(self) -> None:
        """The wait starts now, unless one is already under way."""
        if self._since is None:
            self._since = self._clock()
            self._next_line = self._since + self._settings.first_after

    def tick(self, *, what: str, where: str, why: str) -> None:
        """Still waiting for `what` from the manager at `where` (`why`: no answer, or what
        it answered instead); logs when a line is due."""
        self.begin()
        assert self._since is not None
        now = self._clock()
        if now < self._next_line:
            return
        self._next_line = now + self._settings.every
        if not self._reported:
            self._reported = True
            self._gauge.set(1)
        log.warning(
            "waiting for the manager at %s %s: %s (%.0fs so far)",
            where,
            what,
            why,
            now - self._since,
        )

    def end(self) -> None:
        """The answer came: the gauge goes back to 0; a reported wait says it is over."""
        if self._since is None:
            return
        if self._reported:
            log.info("the manager answered after %.0fs", self._clock() - self._since)
            self._gauge.set(0)
        self._since = None
        self._reported = False
