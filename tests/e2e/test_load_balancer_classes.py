"""`spec.loadBalancerClass` (kubernetes/cloud-provider-openstack#2598): two pyccm service
controllers side by side on the same cluster and cloud, each claiming its own
`spec.loadBalancerClass`, converge their own Services and never touch the other's, nor a Service of
a class neither claims.

Controller A is the whole tree (manager + workers) with `--load-balancer-class
pyccm.io/a`: it claims class a and Services without a class, through the manager's service
view. Controller B is a standalone service worker with `--load-balancer-class pyccm.io/b
--load-balancer-class-only` and its own cluster name, so every cloud call either makes
names the load balancer of the Service it is about (`kube_service_<cluster>_<ns>_<name>`):
the simulator's call log shows who looked at what.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pyccm import lifetime
from pyccm_sim.demo import World, process_tree, simulators
from tests.support.tree import FINALIZER, Cloud, Kube, ingress_ips, initialized, service_port
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

NODES = ["node-0000", "node-0001", "node-0002"]
CLASS_A, CLASS_B, CLASS_C = "pyccm.io/a", "pyccm.io/b", "example.com/someone-else"
CLUSTER_A, CLUSTER_B = "demo", "tree-b"
# Service name -> (its class, the cluster name of the controller that must own it).
SERVICES: dict[str, tuple[str | None, str | None]] = {
    "plain": (None, CLUSTER_A),
    "class-a": (CLASS_A, CLUSTER_A),
    "class-b": (CLASS_B, CLUSTER_B),
    "class-c": (CLASS_C, None),
}
CONVERGE = 60.0


@dataclass(frozen=True)
class SideBySide:
    world: World
    kube: Kube
    cloud: Cloud
    standalone: subprocess.Popen[bytes]


@pytest.fixture(scope="module")
def both(request: pytest.FixtureRequest) -> Iterator[SideBySide]:
    failed_before = request.session.testsfailed
    workdir = Path(tempfile.mkdtemp(prefix="pyccm-e2e-"))
    with ExitStack() as stack:
        world = stack.enter_context(simulators(workdir, nodes=3, latency=0))
        claim_a = f"--load-balancer-class={CLASS_A}"
        stack.enter_context(process_tree(world, manager_args=claim_a, worker_args=claim_a))
        kube = Kube(world.kubeconfig)
        stack.callback(kube.client.close)
        cloud = Cloud(world.cloud_url, world.cloud_conf.parent / "clouds.yaml")
        wait_for(lambda: initialized(kube, NODES), timeout=CONVERGE, what="nodes initialized")
        log = stack.enter_context(open(workdir / "standalone-b.log", "wb"))
        worker = lifetime.spawn(
            [
                *(sys.executable, "-m", "pyccm", "worker", "service", "--standalone"),
                f"--kubeconfig={world.kubeconfig}",
                f"--cloud-config={world.cloud_conf}",
                f"--cluster-name={CLUSTER_B}",
                f"--load-balancer-class={CLASS_B}",
                "--load-balancer-class-only",
                "--cloud-api-qps=100",
                "--cloud-api-burst=100",
            ],
            stdout=log,
            stderr=log,
        )
        try:
            yield SideBySide(world=world, kube=kube, cloud=cloud, standalone=worker)
        finally:
            worker.terminate()
            worker.wait(15)
    if request.session.testsfailed == failed_before:
        shutil.rmtree(workdir, ignore_errors=True)


def create(kube: Kube, name: str, lb_class: str | None) -> None:
    spec: dict[str, Any] = {"type": "LoadBalancer", "ports": [service_port(80)]}
    if lb_class is not None:
        spec["loadBalancerClass"] = lb_class
    body = {"metadata": {"name": name}, "spec": spec}
    kube.client.request("POST", "/api/v1/namespaces/default/services", body=body)


def lb_name(cluster: str, service: str) -> str:
    return f"kube_service_{cluster}_default_{service}"


def owned(both: SideBySide, name: str, cluster: str) -> bool:
    """One ACTIVE load balancer under the owner's name, its address the ingress, our
    finalizer on the Service."""
    service = both.kube.service(name)
    lbs = both.cloud.lbs_named(lb_name(cluster, name))
    if service is None or len(lbs) != 1 or lbs[0]["provisioning_status"] != "ACTIVE":
        return False
    fips = both.cloud.floating_ips_on(lbs[0]["vip_port_id"])
    return (
        len(fips) == 1
        and ingress_ips(service) == [fips[0]["floating_ip_address"]]
        and FINALIZER in service["metadata"].get("finalizers", [])
    )


def foreign_names() -> list[str]:
    """The load-balancer names a controller would look up for a Service it does not own."""
    return [
        lb_name(cluster, name)
        for name, (_, owner) in SERVICES.items()
        for cluster in (CLUSTER_A, CLUSTER_B)
        if cluster != owner
    ]


def test_each_controller_converges_its_own_class_and_never_touches_the_others(
    both: SideBySide,
) -> None:
    for name, (lb_class, _) in SERVICES.items():
        create(both.kube, name, lb_class)

    for name, (_, owner) in SERVICES.items():
        if owner is not None:
            wait_for(
                lambda name=name, owner=owner: owned(both, name, owner),  # type: ignore[misc]
                timeout=CONVERGE,
                what=f"{name} balanced by cluster {owner}",
            )

    # The class nobody claims: no finalizer, no status, no events, no load balancer.
    unclaimed = both.kube.service("class-c")
    assert unclaimed is not None
    assert unclaimed["metadata"].get("finalizers") in (None, [])
    assert ingress_ips(unclaimed) == []
    events = both.kube.items("/api/v1/namespaces/default/events")
    assert [e["reason"] for e in events if e["involvedObject"]["name"] == "class-c"] == []
    assert sorted(lb["name"] for lb in both.cloud.rows("loadbalancer")) == sorted(
        lb_name(owner, name) for name, (_, owner) in SERVICES.items() if owner is not None
    )
    # Nobody even looked: no cloud call names another controller's Service.
    paths = [call["path"] for call in both.cloud.calls(0)]
    assert [p for p in paths if any(foreign in p for foreign in foreign_names())] == []
    assert any(lb_name(CLUSTER_B, "class-b") in p for p in paths)  # B's own lookups show

    # Deleting every Service: each controller deletes its own load balancer.
    for name in SERVICES:
        both.kube.delete(f"/api/v1/namespaces/default/services/{name}")
    wait_for(
        lambda: (
            both.cloud.rows("loadbalancer") == []
            and all(both.kube.service(name) is None for name in SERVICES)
        ),
        timeout=CONVERGE,
        what="every load balancer and Service gone",
    )
    paths = [call["path"] for call in both.cloud.calls(0)]
    assert [p for p in paths if any(foreign in p for foreign in foreign_names())] == []
    assert both.standalone.poll() is None  # B is still running: it never crashed
