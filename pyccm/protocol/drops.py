"""Counting and logging frames that do not decode, for both ends of the bus.

A malformed frame never crashes either side (docs/architecture.md#bus-malformed-frames): it is
counted in
`pyccm_bus_malformed_frames_total{side}` and logged at most once a minute, so a peer that
sends garbage cannot flood the log.
"""

from __future__ import annotations

import logging
import time

from prometheus_client import Counter

log = logging.getLogger(__name__)

MALFORMED_FRAMES = Counter(
    "pyccm_bus_malformed_frames_total",
    "Bus frames dropped because they did not decode.",
    ["side"],
)


class DropLog:
    """Counts every dropped frame; logs one line a minute with the count since the last."""

    def __init__(self, *, side: str, interval: float = 60.0) -> None:
        self._side = side
        self._interval = interval
        self._last = -interval
        self._suppressed = 0

    def dropped(self, error: Exception) -> None:
        MALFORMED_FRAMES.labels(side=self._side).inc()
        now = time.monotonic()
        if now - self._last < self._interval:
            self._suppressed += 1
            return
        log.warning(
            "dropped a malformed bus frame (%s); %d more since the last report",
            error,
            self._suppressed,
        )
        self._last = now
        self._suppressed = 0
