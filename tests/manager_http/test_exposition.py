"""The manager's /metrics page with split-mode workers' reports merged in
(pyccm/exposition.py): one family per name, each report's samples labelled with its
worker, the result parseable as Prometheus reads it."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.parser import text_string_to_metric_families

from pyccm.exposition import merge, render


def registry_with(requests: float, *, lag: float | None = None) -> str:
    registry = CollectorRegistry()
    counter = Counter("openstack_api_requests", "Cloud calls.", ["request"], registry=registry)
    counter.labels(request="server_list").inc(requests)
    if lag is not None:
        gauge = Gauge("pyccm_bus_worker_lag", "Lag.", ["worker"], registry=registry)
        gauge.labels(worker="route").set(lag)
    return render(registry)


def test_without_reports_the_page_is_the_managers_own() -> None:
    own = registry_with(1, lag=2)
    assert merge(own, {}) == own.encode()


def test_families_of_one_name_become_one_and_reports_are_labelled() -> None:
    own = registry_with(1, lag=2)
    page = merge(own, {"cloud-node": registry_with(5), "route": registry_with(7)}).decode()

    helps = [line.split()[2] for line in page.splitlines() if line.startswith("# HELP ")]
    assert sorted(helps) == sorted(set(helps))
    families = {f.name: f for f in text_string_to_metric_families(page)}
    totals = {
        s.labels.get("worker", ""): s.value
        for s in families["openstack_api_requests"].samples
        if s.name == "openstack_api_requests_total"
    }
    assert totals == {"": 1.0, "cloud-node": 5.0, "route": 7.0}
    # The manager's own worker label is left as it is.
    (lag,) = families["pyccm_bus_worker_lag"].samples
    assert (lag.labels, lag.value) == ({"worker": "route"}, 2.0)
