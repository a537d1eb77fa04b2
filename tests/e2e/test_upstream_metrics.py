"""Dashboards and alerts built for upstream's openstack-cloud-controller-manager keep
working: the manager's /metrics (the whole tree, both simulators) exports every series of
../shared/reference/upstream-metrics.md with upstream's type, label names and buckets,
and the new ones move with the work that upstream observes them for.

The tree initializes its nodes (the uninitialized taint goes), ensures a Service's load
balancer, fails another's while Octavia answers 500, updates the first one's members
after a node leaves the backends (one node-sync pass), then deletes it.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pyccm.logs import parse_time
from pyccm_sim.demo import World, process_tree, simulators
from tests.support.logs import admin_token, manager_get
from tests.support.ports import free_port
from tests.support.tree import Cloud, Kube, ingress_ips, initialized
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

CONVERGE = 60.0
EXCLUDE = "node.kubernetes.io/exclude-from-external-load-balancers"

# The reference's two tables: (name, type, label names, buckets without +Inf).
EXPONENTIAL_2 = tuple(2.0**i for i in range(15))  # 1, 2, 4 ... 16384
EXPONENTIAL_4 = (1.0, 4.0, 16.0, 64.0, 256.0, 1024.0)  # upstream's ExponentialBuckets(1, 4, 6)
GO_DEFAULT = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
RECONCILE: tuple[float, ...] = (
    *(0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 7.5, 10, 12.5, 15, 17.5, 20, 22.5, 25, 27.5, 30),
    *(50, 75, 100, 1000),
)
UPSTREAM: tuple[tuple[str, str, tuple[str, ...], tuple[float, ...] | None], ...] = (
    ("service_controller_nodesync_latency_seconds", "histogram", (), EXPONENTIAL_2),
    ("service_controller_update_loadbalancer_host_latency_seconds", "histogram", (), EXPONENTIAL_2),
    ("service_controller_loadbalancer_sync_total", "counter", (), None),
    ("service_controller_nodesync_error_total", "counter", (), None),
    ("node_controller_cloud_provider_taint_removal_delay_seconds", "histogram", (), EXPONENTIAL_4),
    ("node_controller_initial_node_sync_delay_seconds", "histogram", (), EXPONENTIAL_4),
    ("route_controller_route_sync_total", "counter", ("outcome", "trigger"), None),
    ("openstack_api_request_duration_seconds", "histogram", ("request",), GO_DEFAULT),
    ("openstack_api_requests_total", "counter", ("request",), None),
    ("openstack_api_request_errors_total", "counter", ("request",), None),
    ("cloudprovider_openstack_reconcile_duration_seconds", "histogram", ("operation",), RECONCILE),
    ("cloudprovider_openstack_reconcile_total", "counter", ("operation",), None),
    ("cloudprovider_openstack_reconcile_errors_total", "counter", ("operation",), None),
)
RECONCILES = "cloudprovider_openstack_reconcile"
OPERATIONS = {"loadbalancer_ensure", "loadbalancer_update", "loadbalancer_delete"}


@dataclass(frozen=True)
class Family:
    kind: str
    labels: frozenset[str]
    buckets: tuple[float, ...]
    samples: tuple[tuple[str, dict[str, str], float], ...]


@dataclass(frozen=True)
class Scrape:
    families: dict[str, Family]  # by the series name (counters with their `_total`)

    def value(self, sample: str, **labels: str) -> float:
        """The sum of the samples named `sample` whose labels include `labels`."""
        return sum(
            v
            for family in self.families.values()
            for name, have, v in family.samples
            if name == sample and labels.items() <= have.items()
        )


def scrape(port: int, world: World) -> Scrape:
    status, body = manager_get(port, "/metrics", token=admin_token(world.kubeconfig))
    assert status == 200, body[:200]
    families = {}
    for family in text_string_to_metric_families(body.decode()):
        name = family.name + "_total" if family.type == "counter" else family.name
        samples = tuple((s.name, dict(s.labels), s.value) for s in family.samples)
        buckets = sorted(
            {float(labels["le"]) for n, labels, _ in samples if n.endswith("_bucket")}
            - {float("inf")}
        )
        labels = frozenset(k for _, have, _ in samples for k in have) - {"le"}
        families[name] = Family(family.type, labels, tuple(buckets), samples)
    return Scrape(families)


@dataclass(frozen=True)
class Run:
    nodes: list[str]
    # The nodes' ages (creationTimestamp → the last scrape), summed.
    ages: float
    after_ensure: Scrape
    last: Scrape


@pytest.fixture(scope="module")
def run(request: pytest.FixtureRequest) -> Iterator[Run]:
    port = free_port()
    failed_before = request.session.testsfailed
    workdir = Path(tempfile.mkdtemp(prefix="pyccm-upstream-metrics-"))
    with ExitStack() as stack:
        world = stack.enter_context(simulators(workdir, nodes=3, latency=0))
        stack.enter_context(process_tree(world, manager_args=f"--secure-port={port}"))
        kube = Kube(world.kubeconfig)
        stack.callback(kube.client.close)
        cloud = Cloud(world.cloud_url, world.cloud_conf.parent / "clouds.yaml")
        nodes = [n["metadata"]["name"] for n in kube.items("/api/v1/nodes")]

        def metric_at_least(sample: str, minimum: float, **labels: str) -> Scrape | None:
            got = scrape(port, world)
            return got if got.value(sample, **labels) >= minimum else None

        wait_for(lambda: initialized(kube, nodes), timeout=CONVERGE, what="nodes initialized")
        kube.create_service("web")
        wait_for(lambda: ingress_ips(kube.service("web")), timeout=CONVERGE, what="web's LB")
        after_ensure = wait_for(
            lambda: metric_at_least(
                "cloudprovider_openstack_reconcile_total", 1, operation="loadbalancer_ensure"
            ),
            timeout=CONVERGE,
            what="the ensure is counted",
        )
        # Octavia fails every call while a second Service asks for a load balancer.
        cloud.set_knobs(error_rates={"load-balancer": {500: 1.0}})
        kube.create_service("refused", ports=(81,))
        wait_for(
            lambda: metric_at_least(
                "cloudprovider_openstack_reconcile_errors_total",
                1,
                operation="loadbalancer_ensure",
            ),
            timeout=CONVERGE,
            what="the failed ensure is counted",
        )
        cloud.set_knobs(error_rates={})
        # A node leaves the load balancers: one node-sync pass updates web's members.
        kube.patch(f"/api/v1/nodes/{nodes[0]}", {"metadata": {"labels": {EXCLUDE: ""}}})
        wait_for(
            lambda: metric_at_least(
                "cloudprovider_openstack_reconcile_total", 1, operation="loadbalancer_update"
            ),
            timeout=CONVERGE,
            what="the node-driven update is counted",
        )
        kube.delete("/api/v1/namespaces/default/services/web")
        last = wait_for(
            lambda: metric_at_least(
                "cloudprovider_openstack_reconcile_total", 1, operation="loadbalancer_delete"
            ),
            timeout=CONVERGE,
            what="the delete is counted",
        )
        ages = sum(
            time.time() - parse_time(n["metadata"]["creationTimestamp"])
            for n in kube.items("/api/v1/nodes")
        )
        yield Run(nodes=nodes, ages=ages, after_ensure=after_ensure, last=last)
    if request.session.testsfailed == failed_before:
        shutil.rmtree(workdir, ignore_errors=True)


def test_every_upstream_series_is_exported_with_upstreams_type_labels_and_buckets(
    run: Run,
) -> None:
    exported = {
        name: (f.kind, tuple(sorted(f.labels)), f.buckets if f.kind == "histogram" else None)
        for name, f in run.last.families.items()
    }
    expected = {
        name: (kind, labels, None if buckets is None else tuple(float(b) for b in buckets))
        for name, kind, labels, buckets in UPSTREAM
    }
    assert {name: exported.get(name) for name in expected} == expected
    for name in (
        "cloudprovider_openstack_reconcile_total",
        "cloudprovider_openstack_reconcile_errors_total",
    ):
        operations = {labels["operation"] for _, labels, _ in run.last.families[name].samples}
        assert operations == OPERATIONS


def test_each_initialized_node_observes_one_delay_of_each_kind_within_its_age(
    run: Run,
) -> None:
    for name in (
        "node_controller_cloud_provider_taint_removal_delay_seconds",
        "node_controller_initial_node_sync_delay_seconds",
    ):
        assert run.last.value(f"{name}_count") == len(run.nodes)
        # Each one's age when its taint went: more than nothing (the nodes were there before
        # the tree), less than its age now.
        assert 0 < run.last.value(f"{name}_sum") < run.ages


def test_reconciles_and_the_node_sync_pass_are_counted(run: Run) -> None:
    def reconciles(series: str, operation: str) -> float:
        return run.last.value(f"{RECONCILES}_{series}", operation=f"loadbalancer_{operation}")

    assert reconciles("total", "ensure") >= 2  # web, and refused once Octavia answered
    assert reconciles("duration_seconds_count", "ensure") == reconciles("total", "ensure")
    assert reconciles("errors_total", "ensure") >= 1
    assert reconciles("total", "update") >= 1
    assert reconciles("total", "delete") >= 1
    # The nodes' arrival made the route worker reconcile (and create their routes).
    assert run.last.value("route_controller_route_sync_total", trigger="node_change") >= 1
    # The exclusion's pass: more passes than before it (the nodes' arrival made some too).
    passes = "service_controller_nodesync_latency_seconds_count"
    assert run.last.value(passes) > run.after_ensure.value(passes)
