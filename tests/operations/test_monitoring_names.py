"""The dashboard and the alert rules in deploy/monitoring/ query only series the tree exports.

Every PromQL expression of `dashboard.json` and `alerts.yaml` is reduced to the series
names it selects; each must be a sample name of a real scrape of the manager's /metrics
(so `_total` of a counter and `_bucket` of a histogram are checked as Prometheus sees
them, not guessed from a family name). The scrape comes from the whole tree against both
simulators after it has done each kind of work a panel or a rule shows: a LoadBalancer
Service converged, nodes and routes synced, failed cloud calls (Octavia answering 500 for a
while), and a malformed frame sent to the bus. A metric renamed in code, or a typo in a
query, fails here.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
import zmq
from prometheus_client.parser import text_string_to_metric_families

from pyccm.flags.addresses import bus_addresses
from pyccm_sim.demo import World, process_tree, simulators
from tests.support.logs import admin_token, manager_get
from tests.support.ports import free_port
from tests.support.tree import REPO, Cloud, Kube, ingress_ips
from tests.support.waiting import wait_for

MONITORING = REPO / "deploy" / "monitoring"
CONVERGE = 60.0
# Words of PromQL that are not series names (functions are recognized by their "(").
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
KEYWORDS |= {"and", "or", "unless", "bool", "offset", "inf", "nan"}
# A series name, not the tail of a number (1e3) or of another word.
NAME = re.compile(r"(?<![\w.:])[A-Za-z_:][\w:]*")


def series_names(expression: str) -> set[str]:
    """The series names a PromQL expression selects."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expression)  # strings: label_replace's arguments
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges and subqueries
    text = re.sub(
        r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text
    )  # label lists of aggregations and vector matching
    names = set()
    for match in NAME.finditer(text):
        if text[match.end() :].lstrip().startswith("("):
            continue  # a function or an aggregation
        if match.group().lower() not in KEYWORDS:
            names.add(match.group())
    return names


def test_series_names_are_read_from_promql() -> None:
    expression = (
        'sum by (action, outcome) (rate(a_total{outcome=~"x|y"}[5m])) / on (action) '
        "group_left histogram_quantile(0.99, sum by (le) (rate(b_bucket[$__rate_interval]))) "
        '> 1e3 and c offset 5m or label_replace(d, "r", "$1", "request", "([a-z]+)_.*")'
        " unless (time() - max by (worker) (e_timestamp_seconds) > 30) or vector(0)"
    )
    assert series_names(expression) == {"a_total", "b_bucket", "c", "d", "e_timestamp_seconds"}


def dashboard_expressions() -> list[str]:
    dashboard = json.loads((MONITORING / "dashboard.json").read_text())
    panels = list(dashboard["panels"])
    for row in dashboard["panels"]:
        panels += row.get("panels", [])  # panels inside collapsed rows
    return [target["expr"] for panel in panels for target in panel.get("targets", [])]


def alert_expressions() -> list[str]:
    rules = yaml.safe_load((MONITORING / "alerts.yaml").read_text())
    found = []
    for group in rules["groups"]:
        for rule in group["rules"]:
            assert rule["alert"].startswith("Pyccm"), rule
            assert rule["labels"]["severity"] in ("critical", "warning"), rule
            assert rule["annotations"]["summary"], rule
            found.append(rule["expr"])
    return found


def test_the_dashboard_and_the_rules_cover_what_the_issue_names() -> None:
    panels = " ".join(dashboard_expressions())
    for name in (
        "pyccm_sync_total",  # sync rates and errors per controller
        "pyccm_sync_duration_seconds_bucket",  # sync latency
        "openstack_api_requests_total",  # cloud API calls
        "openstack_api_request_errors_total",
        "pyccm_bus_worker_lag",  # bus lag
        "pyccm_bus_malformed_frames_total",  # bus drops
        "pyccm_writer_actions_total",  # the writer
        "leader_election_master_status",  # the leader
    ):
        assert name in panels, name
    rules = yaml.safe_load((MONITORING / "alerts.yaml").read_text())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    assert {
        "PyccmNoLeader",
        "PyccmWorkerSilent",
        "PyccmSyncErrorsRising",
        "PyccmCloudApiErrors",
        "PyccmRouteLimitReached",
        "PyccmBusDroppingFrames",
    } <= alerts
    no_leader = next(
        r for g in rules["groups"] for r in g["rules"] if r["alert"] == "PyccmNoLeader"
    )
    assert no_leader["for"] == "2m"


@dataclass(frozen=True)
class Scraped:
    samples: dict[str, list[tuple[dict[str, str], float]]]  # sample name -> labels, value
    at: float


def scrape(port: int, world: World) -> Scraped:
    """One scrape of the manager's /metrics, as Prometheus does it with a token."""
    status, body = manager_get(port, "/metrics", token=admin_token(world.kubeconfig))
    assert status == 200, body[:200]
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return Scraped(samples=samples, at=time.time())


def send_garbage_to_the_bus(world: World) -> None:
    """What a peer of another protocol version would send: a frame that does not decode."""
    _, router = bus_addresses(str(world.workdir / "run"))
    with zmq.Context() as context, context.socket(zmq.DEALER) as dealer:
        dealer.setsockopt(zmq.LINGER, 1000)
        dealer.connect(router)
        dealer.send(b"\xc1 not msgpack")


@pytest.fixture(scope="module")
def scraped(request: pytest.FixtureRequest) -> Iterator[Scraped]:
    port = free_port()
    failed_before = request.session.testsfailed
    workdir = Path(tempfile.mkdtemp(prefix="pyccm-monitoring-"))
    with ExitStack() as stack:
        world = stack.enter_context(simulators(workdir, nodes=2, latency=0))
        stack.enter_context(process_tree(world, manager_args=f"--secure-port={port}"))
        kube = Kube(world.kubeconfig)
        stack.callback(kube.client.close)
        cloud = Cloud(world.cloud_url, world.cloud_conf.parent / "clouds.yaml")
        kube.create_service("web")
        wait_for(
            lambda: ingress_ips(kube.service("web")),
            timeout=CONVERGE,
            what="the Service gets its load balancer's address",
        )
        # Octavia fails every call while a second Service asks for a load balancer.
        cloud.set_knobs(error_rates={"load-balancer": {500: 1.0}})
        kube.create_service("refused", ports=(81,))
        wait_for(
            lambda: "openstack_api_request_errors_total" in scrape(port, world).samples,
            timeout=CONVERGE,
            what="failed cloud calls are counted",
        )
        cloud.set_knobs(error_rates={})
        send_garbage_to_the_bus(world)

        def with_the_drop() -> Scraped | None:
            got = scrape(port, world)
            return got if "pyccm_bus_malformed_frames_total" in got.samples else None

        yield wait_for(with_the_drop, timeout=CONVERGE, what="the dropped bus frame is counted")
    if request.session.testsfailed == failed_before:
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.mark.e2e
@pytest.mark.parametrize("source", ["dashboard.json", "alerts.yaml"])
def test_every_series_queried_is_exported(source: str, scraped: Scraped) -> None:
    expressions = dashboard_expressions() if source == "dashboard.json" else alert_expressions()
    assert expressions
    missing = {
        expression: sorted(names - set(scraped.samples))
        for expression in expressions
        if (names := series_names(expression)) - set(scraped.samples)
    }
    assert missing == {}


@pytest.mark.e2e
def test_the_manager_exports_when_it_last_heard_from_each_worker(scraped: Scraped) -> None:
    seen = {
        labels["worker"]: value
        for labels, value in scraped.samples["pyccm_bus_worker_last_seen_timestamp_seconds"]
    }
    assert set(seen) == {"cloud-node", "cloud-node-lifecycle", "service", "route"}
    # Workers send a heartbeat every second: none is older than a few.
    assert all(scraped.at - value < 10 for value in seen.values()), seen
