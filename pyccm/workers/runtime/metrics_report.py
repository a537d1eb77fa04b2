"""A split-mode worker's metrics, sent to its manager (pyccm/exposition.py says why).

On a tcp:// bus the worker is in a pod of its own, whose metrics nobody scrapes: every
`REPORT_INTERVAL` it sends them to the manager, which serves them with its own. The first
report goes once the worker has been up that long (its first syncs counted). On ipc:// the
manager reads every process's metrics from PROMETHEUS_MULTIPROC_DIR: nothing is sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pyccm.exposition import REPORT_INTERVAL, local_registry, render
from pyccm.protocol.messages import SessionId, WorkerMetrics, encode


class MetricsReport:
    def __init__(
        self,
        *,
        router_address: str,
        session: SessionId,
        worker: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._session = session
        self._worker = worker
        self._registry = local_registry() if router_address.startswith("tcp://") else None
        self._next = clock() + REPORT_INTERVAL

    def due(self, now: float) -> bytes | None:
        """The encoded report when one is due at `now`, else None."""
        if self._registry is None or now < self._next:
            return None
        self._next = now + REPORT_INTERVAL
        exposition = render(self._registry)
        return encode(
            WorkerMetrics(session=self._session, worker=self._worker, exposition=exposition)
        )
