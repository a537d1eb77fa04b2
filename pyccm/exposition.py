"""Prometheus exposition shared by the manager's `/metrics` and the workers' metrics reports.

In one pod (supervisord) every process writes its metrics to `PROMETHEUS_MULTIPROC_DIR` and
one scrape of the manager reads them all. In split mode each worker runs in its own pod,
which serves no port: the worker sends its own exposition over the bus (`WorkerMetrics`,
every `REPORT_INTERVAL`) and the manager's `/metrics` merges the latest report of each worker
into its own, every sample of a report labelled `worker="<name>"`. Families of the same
name (the manager's and the workers', or two workers') become one family, so the page stays
valid for Prometheus (one HELP and TYPE per name).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Iterator, Mapping

from prometheus_client import REGISTRY, CollectorRegistry, Metric, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

# How often a worker on a tcp:// bus sends its metrics, and how old a report may get before
# the manager leaves it out (a worker gone or moved to another manager).
REPORT_INTERVAL = 15.0
REPORT_MAX_AGE = 3 * REPORT_INTERVAL
WORKER_LABEL = "worker"


def local_registry() -> CollectorRegistry:
    """This process's metrics: every process of the pod's through `PROMETHEUS_MULTIPROC_DIR`
    when it is set, else the process's default registry."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    return pod_registry(directory) if directory else REGISTRY


def pod_registry(directory: str) -> CollectorRegistry:
    """Every process's metrics files in `directory`, merged as prometheus_client's
    `MultiProcessCollector` merges them, leaving out a file still at 0 bytes.

    prometheus_client creates a process's file and sizes it a moment later; a scrape in
    between (a worker starting or restarting) raised `struct.error` and lost the whole
    page, and for good when the process died in that moment, since the empty file stays
    (prometheus/client_python#1199, open). An empty file holds no sample, so leaving it
    out loses nothing."""
    registry = CollectorRegistry()
    registry.register(_PodFiles(directory))
    return registry


class _PodFiles:
    def __init__(self, directory: str) -> None:
        self._directory = directory

    def collect(self) -> Iterable[Metric]:
        files = [f for f in glob.glob(os.path.join(self._directory, "*.db")) if _sized(f)]
        merged: Iterable[Metric]
        merged = MultiProcessCollector.merge(files, accumulate=True)  # type: ignore[no-untyped-call]
        return merged


def _sized(path: str) -> bool:
    try:
        return os.path.getsize(path) > 0
    except FileNotFoundError:  # a dead process's live gauges, removed meanwhile
        return False


def render(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode()


class _Merged:
    """One collection: the manager's families, then each worker report's, merged by name."""

    def __init__(self, own: str, reports: Mapping[str, str]) -> None:
        self._own = own
        self._reports = reports

    def collect(self) -> Iterator[Metric]:
        merged: dict[str, Metric] = {}
        sources = [("", self._own), *sorted(self._reports.items())]
        for worker, text in sources:
            for family in text_string_to_metric_families(text):
                samples = family.samples
                if worker:
                    samples = [
                        s._replace(labels={**s.labels, WORKER_LABEL: worker}) for s in samples
                    ]
                into = merged.get(family.name)
                if into is None:
                    into = Metric(family.name, family.documentation, family.type, family.unit)
                    merged[family.name] = into
                elif into.type != family.type:
                    continue  # the same name with another type: the first one stands
                into.samples.extend(samples)
        yield from merged.values()


def merge(own: str, reports: Mapping[str, str]) -> bytes:
    """The manager's exposition `own` with each worker's report (name -> exposition)."""
    if not reports:
        return own.encode()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Merged(own, reports))
    return generate_latest(registry)
