"""A started process tree (both simulators and supervisord), the Kubernetes API and the
OpenStack simulator's admin API as a test reads them (tests/e2e, the deploy, packaging and
operations tests, the benches)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request
import warnings
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pyccm.kubeapi.client import MERGE_PATCH, KubeClient, KubeSettings
from pyccm.kubeapi.errors import NotFound
from pyccm_sim.demo import World, process_tree, simulators
from pyccm_sim.scenario import CLUSTER_CIDR

REPO = Path(__file__).resolve().parents[2]
FINALIZER = "service.kubernetes.io/load-balancer-cleanup"
LB_ID = "loadbalancer.openstack.org/load-balancer-id"
# Octavia and Neutron kinds a Service's load balancer is made of (the simulator's names).
LB_KINDS = ("loadbalancer", "listener", "pool", "member", "healthmonitor", "floatingip", "port")


class Cloud:
    """The OpenStack simulator as a test sees it: inventory, knobs, call log, counters."""

    def __init__(self, url: str, clouds_yaml: Path) -> None:
        self._url = url.rstrip("/")
        self._clouds_yaml = clouds_yaml
        self._connection: Any = None

    def _admin(self, method: str, path: str, body: object = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self._url}/_sim{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.load(answer)

    def rows(self, kind: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self._admin("GET", f"/resources/{kind}")["items"]
        return items

    def inventory(self) -> dict[str, int]:
        counts: dict[str, int] = self._admin("GET", "/counters")["inventory"]
        return counts

    def created(self, kind: str) -> int:
        counters: dict[str, dict[str, int]] = self._admin("GET", "/counters")["counters"]
        return counters.get(kind, {}).get("created", 0)

    def set_knobs(self, **knobs: object) -> None:
        self._admin("PATCH", "/knobs", knobs)

    def mark(self) -> int:
        mark: int = self._admin("GET", "/calls?since=0")["next"]
        return mark

    def calls(self, since: int) -> list[dict[str, Any]]:
        calls: list[dict[str, Any]] = self._admin("GET", f"/calls?since={since}")["calls"]
        return calls

    def lbs_named(self, name: str) -> list[dict[str, Any]]:
        return [lb for lb in self.rows("loadbalancer") if lb["name"] == name]

    def floating_ips_on(self, port_id: str) -> list[dict[str, Any]]:
        return [f for f in self.rows("floatingip") if f["port_id"] == port_id]

    # The admin inventory does not say which load balancer a listener belongs to; the
    # Octavia API does, read as an operator would (`openstack loadbalancer listener list`).
    # Filtered here by the objects' own references: openstacksdk does not send every
    # filter under the name Octavia reads.
    def api(self) -> Any:
        """An openstacksdk Connection to the simulator, from its clouds.yaml."""
        if self._connection is None:
            self._connection = sdk_connection(self._clouds_yaml)
        return self._connection

    def listeners_of(self, lb_id: str) -> list[Any]:
        listeners = self.api().load_balancer.listeners()
        return [li for li in listeners if _refers(li.load_balancers, lb_id)]

    def pools_of(self, lb_id: str) -> list[Any]:
        pools = self.api().load_balancer.pools()
        return [pool for pool in pools if _refers(pool.loadbalancers, lb_id)]

    def members_of(self, lb_id: str) -> set[tuple[str, int]]:
        """(address, port) of every member of every pool of the load balancer."""
        octavia = self.api().load_balancer
        return {
            (member.address, member.protocol_port)
            for pool in self.pools_of(lb_id)
            for member in octavia.members(pool.id)
        }

    def monitors_of(self, lb_id: str) -> list[Any]:
        pools = {pool.id for pool in self.pools_of(lb_id)}
        monitors = self.api().load_balancer.health_monitors()
        return [m for m in monitors if any(_refers(m.pools, pool) for pool in pools)]

    def routes(self) -> set[tuple[str, str]]:
        return {
            (route["destination"], route["nexthop"])
            for router in self.rows("router")
            for route in router.get("routes", [])
        }


def _refers(references: list[dict[str, str]] | None, object_id: str) -> bool:
    return any(ref.get("id") == object_id for ref in references or [])


def sdk_connection(clouds_yaml: Path) -> Any:
    from openstack import config, connection

    loader = config.OpenStackConfig(
        config_files=[str(clouds_yaml)], vendor_files=[], secure_files=[], load_envvars=False
    )
    with warnings.catch_warnings():
        # openstacksdk 4.x warns (PendingDeprecationWarning) on every CloudRegion it builds;
        # fatal under filterwarnings=error and not ours to fix (as sim/openstack/testing.py).
        warnings.filterwarnings("ignore", category=PendingDeprecationWarning, module="openstack")
        return connection.Connection(config=loader.get_one(cloud="pyccm-sim"))


class Kube:
    """The Kubernetes simulator as a test sees it: raw JSON objects, not the product's views."""

    def __init__(self, kubeconfig: Path) -> None:
        # Polling lists is cheap for the simulator; the product's 20 QPS default would make
        # a test wait on its own client.
        settings = KubeSettings(kubeconfig=str(kubeconfig), qps=500.0, burst=500)
        self.client = KubeClient(settings=settings)

    def get(self, path: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = msgspec.json.decode(self.client.request("GET", path))
        except NotFound:
            return None
        return found

    def items(self, path: str) -> list[dict[str, Any]]:
        listed = self.get(path)
        return [] if listed is None else list(listed["items"])

    def service(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        return self.get(f"/api/v1/namespaces/{namespace}/services/{name}")

    def create_service(
        self,
        name: str,
        *,
        ports: tuple[int, ...] = (80,),
        annotations: Mapping[str, str] | None = None,
        namespace: str = "default",
    ) -> None:
        body = {
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}},
            "spec": {"type": "LoadBalancer", "ports": [service_port(p) for p in ports]},
        }
        self.client.request("POST", f"/api/v1/namespaces/{namespace}/services", body=body)

    def patch(self, path: str, patch: Mapping[str, Any], content_type: str = MERGE_PATCH) -> None:
        self.client.request("PATCH", path, body=patch, content_type=content_type)

    def patch_service(self, name: str, patch: Mapping[str, Any]) -> None:
        self.patch(f"/api/v1/namespaces/default/services/{name}", patch)

    def delete(self, path: str) -> None:
        self.client.request("DELETE", path)

    def node(self, name: str) -> dict[str, Any] | None:
        return self.get(f"/api/v1/nodes/{name}")

    def events(self, reason: str, namespace: str = "default") -> list[dict[str, Any]]:
        items = self.items(f"/api/v1/namespaces/{namespace}/events")
        return [e for e in items if e["reason"] == reason]


def service_port(port: int) -> dict[str, Any]:
    """A TCP port whose node port is derived from it, so tests can predict members."""
    return {
        "name": f"p{port}",
        "port": port,
        "protocol": "TCP",
        "targetPort": port,
        "nodePort": node_port(port),
    }


def node_port(port: int) -> int:
    return 30000 + port % 2000


def ingress_ips(service: dict[str, Any] | None) -> list[str]:
    if service is None:
        return []
    ingress = service.get("status", {}).get("loadBalancer", {}).get("ingress") or []
    return [entry.get("ip", "") for entry in ingress]


def internal_ip(node: dict[str, Any] | None) -> str:
    addresses = [] if node is None else node.get("status", {}).get("addresses", [])
    return next((a["address"] for a in addresses if a["type"] == "InternalIP"), "")


@dataclass(frozen=True)
class Tree:
    world: World
    kube: Kube
    cloud: Cloud


@contextmanager
def running_tree(
    request: pytest.FixtureRequest,
    *,
    nodes: int,
    servers: int | None = None,
    cluster_cidr: str = CLUSTER_CIDR,
    worker_args: str = "",
    kube_args: tuple[str, ...] = (),
) -> Iterator[Tree]:
    """Both simulators and the supervisord tree in a temporary directory, removed afterwards
    unless a test failed meanwhile: then its logs (`kube.log`, `openstack.log`, `tree.log`)
    stay for the reader."""
    failed_before = request.session.testsfailed
    workdir = Path(tempfile.mkdtemp(prefix="pyccm-e2e-"))
    with ExitStack() as stack:
        world = stack.enter_context(
            simulators(workdir, nodes=nodes, latency=0, servers=servers, kube_args=kube_args)
        )
        stack.enter_context(process_tree(world, cluster_cidr=cluster_cidr, worker_args=worker_args))
        kube = Kube(world.kubeconfig)
        stack.callback(kube.client.close)
        clouds_yaml = world.cloud_conf.parent / "clouds.yaml"
        yield Tree(world=world, kube=kube, cloud=Cloud(world.cloud_url, clouds_yaml))
    if request.session.testsfailed == failed_before:
        shutil.rmtree(workdir, ignore_errors=True)


def initialized(kube: Kube, names: list[str]) -> bool:
    """Every named node has its providerID and no uninitialized taint."""
    for name in names:
        node = kube.node(name)
        if node is None or not node.get("spec", {}).get("providerID"):
            return False
        if any(t["key"].endswith("/uninitialized") for t in node["spec"].get("taints") or []):
            return False
    return True


def supervisorctl(world: World, *args: str) -> str:
    env = dict(os.environ, PYCCM_RUNTIME_DIR=str(world.workdir / "run"))
    ctl = Path(sys.executable).parent / "supervisorctl"
    return subprocess.run(
        [str(ctl), "-c", str(REPO / "supervisord.conf"), *args],
        check=False,
        env=env,
        capture_output=True,
        text=True,
    ).stdout


def kill_program(world: World, program: str) -> int:
    """SIGKILL one supervised process; returns the pid it had."""
    pid = int(supervisorctl(world, "pid", program).strip())
    os.kill(pid, signal.SIGKILL)
    return pid
