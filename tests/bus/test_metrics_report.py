"""A split-mode worker's metrics report (runtime/metrics_report.py) on a fake clock: sent
every REPORT_INTERVAL on a tcp:// bus, never on ipc:// (the manager reads the pod's
PROMETHEUS_MULTIPROC_DIR there)."""

from __future__ import annotations

from pyccm.exposition import REPORT_INTERVAL
from pyccm.protocol.messages import SessionId, WorkerMetrics, decode
from pyccm.workers.runtime.bus import DELTAS_RECEIVED
from pyccm.workers.runtime.metrics_report import MetricsReport


def test_a_tcp_worker_reports_its_metrics_every_interval() -> None:
    DELTAS_RECEIVED.labels(worker="reporter", topic="node").inc()
    now = 1000.0
    report = MetricsReport(
        router_address="tcp://127.0.0.1:5557",
        session=SessionId("s"),
        worker="reporter",
        clock=lambda: now,
    )
    assert report.due(now) is None
    assert report.due(now + REPORT_INTERVAL - 0.1) is None
    sent = report.due(now + REPORT_INTERVAL)
    assert sent is not None
    message = decode(sent)
    assert isinstance(message, WorkerMetrics)
    assert message.worker == "reporter"
    assert 'pyccm_bus_deltas_received_total{topic="node",worker="reporter"}' in (message.exposition)
    assert report.due(now + REPORT_INTERVAL + 1) is None
    assert report.due(now + 2 * REPORT_INTERVAL) is not None


def test_an_ipc_worker_sends_none() -> None:
    report = MetricsReport(
        router_address="ipc:///run/pyccm/bus-router.sock",
        session=SessionId("s"),
        worker="reporter",
        clock=lambda: 0.0,
    )
    assert report.due(10 * REPORT_INTERVAL) is None
