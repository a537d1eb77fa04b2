"""`pyccm plan service NAMESPACE/NAME`: what an ensure would do now, from the service
worker's own code, with only GETs in the cloud's call log; `--annotation` shows what an
annotation change would do before it is made, and the ensure then writes exactly that."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from pyccm.kubeapi.client import KubeClient, KubeSettings
from pyccm.protocol.views import Node, Service
from pyccm.workers.runtime.oneshot import nodes
from pyccm.workers.service.policy import is_backend
from pyccm_sim.kube.testing import KubeSimHandle
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.cli import lb_service, pyccm
from tests.support.lb import MakeLbs, ensure

LB_METHOD = "loadbalancer.openstack.org/lb-method"


@pytest.fixture
def web(kube: KubeSimHandle) -> Iterator[tuple[Service, list[Node]]]:
    """`default/web` in the cluster, as the provider sees it, and the backend nodes."""
    kube.create("services", lb_service("web"), "default")
    client = KubeClient(settings=KubeSettings(kubeconfig=str(kube.kubeconfig_path)))
    try:
        raw = client.request("GET", "/api/v1/namespaces/default/services/web")
        backends = [n for n in nodes(client) if is_backend(n)]
    finally:
        client.close()
    yield msgspec.json.decode(raw, type=Service), backends
    kube.delete("services", "web", "default")


def plan(sim: OpenStackSimHandle, kube: KubeSimHandle, *extra: str) -> Any:
    ran = pyccm(
        "plan",
        "service",
        "default/web",
        "--kubeconfig",
        kube.kubeconfig_path,
        "--cloud-config",
        sim.cloud_conf_path,
        "--output",
        "json",
        *extra,
    )
    assert ran.code == 0, ran.stderr
    return ran.json()


def test_a_new_service_plans_its_load_balancer_and_only_reads(
    sim: OpenStackSimHandle, kube: KubeSimHandle, web: tuple[Service, list[Node]]
) -> None:
    mark = sim.mark()
    planned = plan(sim, kube)
    assert [(c["action"], c["kind"]) for c in planned["changes"]] == [("create", "load balancer")]
    create = planned["changes"][0]
    assert create["target"] == "kube_service_kubernetes_default_web"
    assert [li["protocol_port"] for li in create["fields"]["listeners"]] == [80, 443]
    assert any(t.startswith("pyccm-cluster:") for t in create["fields"]["tags"])
    assert "was just created" in planned["waits"]
    assert sim.resources("loadbalancer") == []
    methods = {c.method for c in sim.calls(since=mark) if c.service != "identity"}
    assert methods == {"GET"}


def test_an_annotation_change_is_planned_as_the_fields_the_ensure_then_writes(
    sim: OpenStackSimHandle,
    kube: KubeSimHandle,
    web: tuple[Service, list[Node]],
    make_lbs: MakeLbs,
    cluster_id: str,
) -> None:
    service, backends = web
    lbs = make_lbs(cluster_id=cluster_id)
    ensure(lbs, service, backends)
    assert plan(sim, kube)["changes"] == []  # the cloud matches

    mark = sim.mark()
    planned = plan(sim, kube, "--annotation", f"{LB_METHOD}=LEAST_CONNECTIONS")
    assert [(c["action"], c["kind"], c["fields"]) for c in planned["changes"]] == [
        ("update", "pool", {"lb_algorithm": "LEAST_CONNECTIONS"}),
        ("update", "pool", {"lb_algorithm": "LEAST_CONNECTIONS"}),
    ]
    assert sim.writes(since=mark) == []

    # The ensure of the annotated Service writes exactly the planned changes.
    meta = msgspec.structs.replace(
        service.metadata,
        annotations={**service.metadata.annotations, LB_METHOD: "LEAST_CONNECTIONS"},
    )
    mark = sim.mark()
    ensure(lbs, msgspec.structs.replace(service, metadata=meta), backends)
    written = [(c.method, c.path.rsplit("/", 1)[-1]) for c in sim.writes(since=mark)]
    assert written == [("PUT", c["target"]) for c in planned["changes"]]
