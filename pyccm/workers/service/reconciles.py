"""Upstream's reconcile metrics (openstack-cloud-controller-manager's pkg/metrics).

One sample per EnsureLoadBalancer / UpdateLoadBalancer / EnsureLoadBalancerDeleted, by
`operation` = `loadbalancer_ensure` / `loadbalancer_update` / `loadbalancer_delete`; an
error also counts in `_errors_total`. Upstream's call blocks until the load balancer is
ACTIVE; here a call that finds it PENDING_* raises `RetryAfter` and a later sync carries
on, so one reconcile spans the calls up to the one that finishes (success or error): its
duration runs from the first of them, and the calls that stopped on `RetryAfter` count
nothing of their own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import Counter, Histogram

from pyccm.protocol.views import Service
from pyccm.provider.errors import ImplementedElsewhere, RetryAfter
from pyccm.workers.runtime.clock import Clock

ENSURE = "loadbalancer_ensure"
UPDATE = "loadbalancer_update"
DELETE = "loadbalancer_delete"
OPERATIONS = (ENSURE, UPDATE, DELETE)

# Upstream's buckets (seconds).
BUCKETS: tuple[float, ...] = (
    *(0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 7.5, 10, 12.5, 15, 17.5, 20, 22.5, 25, 27.5, 30),
    *(50, 75, 100, 1000),
)

DURATION = Histogram(
    "cloudprovider_openstack_reconcile_duration_seconds",
    "Time per load-balancer reconcile (ensure, update, delete), from its first call to the"
    " one that finished it (upstream's metric).",
    ["operation"],
    buckets=BUCKETS,
)
TOTAL = Counter(
    "cloudprovider_openstack_reconcile_total",
    "Finished load-balancer reconciles, by operation (upstream's metric).",
    ["operation"],
)
ERRORS = Counter(
    "cloudprovider_openstack_reconcile_errors_total",
    "Load-balancer reconciles that ended in an error, by operation (upstream's metric).",
    ["operation"],
)


class Call:
    """One provider call inside `Reconciles.call`; `skip()` when another controller
    implements the Service's load balancer (no sample, as upstream never calls it)."""

    def __init__(self) -> None:
        self.skipped = False

    def skip(self) -> None:
        self.skipped = True


class Reconciles:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        # (operation, Service uid) -> when its first call started, while calls of it
        # stop on RetryAfter.
        self._started: dict[tuple[str, str], float] = {}
        for operation in OPERATIONS:
            # Exported at 0 from the start, as dashboards' rate() wants.
            DURATION.labels(operation=operation)
            TOTAL.labels(operation=operation)
            ERRORS.labels(operation=operation)

    @contextmanager
    def call(self, operation: str, service: Service) -> Iterator[Call]:
        key = (operation, service.metadata.uid)
        with self._lock:
            started = self._started.setdefault(key, self._clock.now())
        call = Call()
        try:
            yield call
        except RetryAfter:
            raise  # the reconcile goes on in a later sync
        except ImplementedElsewhere:
            self._forget(service)
            raise
        except Exception:
            self._finished(operation, service, started, failed=True)
            raise
        if call.skipped:
            self._forget(service)
        else:
            self._finished(operation, service, started, failed=False)

    def _finished(self, operation: str, service: Service, started: float, *, failed: bool) -> None:
        DURATION.labels(operation=operation).observe(max(0.0, self._clock.now() - started))
        TOTAL.labels(operation=operation).inc()
        if failed:
            ERRORS.labels(operation=operation).inc()
        self._forget(service)

    def _forget(self, service: Service) -> None:
        """A finished call of any operation ends what an earlier one left pending (an
        ensure cut short by the Service's deletion)."""
        uid = service.metadata.uid
        with self._lock:
            for operation in OPERATIONS:
                self._started.pop((operation, uid), None)
