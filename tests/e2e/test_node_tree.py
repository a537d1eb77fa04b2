"""The real process tree (supervisord: manager + node + lifecycle workers, openstack
provider, ipc bus) against both simulators, each in its own process.

The cloud has servers node-0000..node-0004; the cluster has nodes node-0000..node-0003.
node-0001's server is SHUTOFF, node-0002's server is deleted, node-0004 has a server but
no Node until a test creates one (after killing the node worker).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pyccm.kubeapi.client import MERGE_PATCH, STRATEGIC_MERGE_PATCH, KubeClient, KubeSettings
from pyccm.kubeapi.errors import NotFound
from pyccm.protocol.views import Node
from pyccm_sim.demo import World, process_tree, simulators
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"
SHUTDOWN = "node.cloudprovider.kubernetes.io/shutdown"


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    workdir = Path(tempfile.mkdtemp(prefix="pyccm-e2e-"))
    with ExitStack() as stack:
        world = stack.enter_context(
            simulators(
                workdir,
                nodes=4,
                latency=0,
                servers=5,
                cloud_args=("--seed-shutoff", "1", "--seed-deleted", "2"),
            )
        )
        stack.enter_context(process_tree(world))
        yield world


@pytest.fixture(scope="module")
def kube(world: World) -> Iterator[KubeClient]:
    client = KubeClient(settings=KubeSettings(kubeconfig=str(world.kubeconfig)))
    yield client
    client.close()


def node(kube: KubeClient, name: str) -> Node | None:
    try:
        return msgspec.json.decode(kube.request("GET", f"/api/v1/nodes/{name}"), type=Node)
    except NotFound:
        return None


def initialized(kube: KubeClient, name: str) -> bool:
    current = node(kube, name)
    return (
        current is not None
        and not current.has_taint(UNINITIALIZED)
        and bool(current.spec.provider_id)
    )


def set_ready(kube: KubeClient, name: str, status: str) -> None:
    body = {"status": {"conditions": [{"type": "Ready", "status": status, "reason": "Test"}]}}
    kube.request(
        "PATCH", f"/api/v1/nodes/{name}/status", body=body, content_type=STRATEGIC_MERGE_PATCH
    )


def events(kube: KubeClient, reason: str) -> list[dict[str, Any]]:
    items = msgspec.json.decode(kube.request("GET", "/api/v1/namespaces/default/events"))["items"]
    return [e for e in items if e["reason"] == reason]


def test_nodes_are_initialized_from_the_cloud(kube: KubeClient) -> None:
    eventually(lambda: initialized(kube, "node-0000"), timeout=60)
    current = node(kube, "node-0000")
    assert current is not None
    assert current.spec.provider_id.startswith("openstack:///")
    assert current.metadata.labels["node.kubernetes.io/instance-type"]
    assert current.metadata.labels["topology.kubernetes.io/region"] == "RegionOne"
    assert ("InternalIP", "10.0.0.10") in {(a.type, a.address) for a in current.status.addresses}
    assert any(e["involvedObject"]["name"] == "node-0000" for e in events(kube, "Synced"))


def test_a_node_without_a_server_is_explained_then_deleted_when_not_ready(kube: KubeClient) -> None:
    eventually(
        lambda: any(
            e["involvedObject"]["name"] == "node-0002"
            for e in events(kube, "FailedToInitializeNode")
        )
    )
    set_ready(kube, "node-0002", "False")
    eventually(lambda: node(kube, "node-0002") is None, timeout=30)
    assert any(e["involvedObject"]["name"] == "node-0002" for e in events(kube, "DeletingNode"))


def test_a_shut_down_server_taints_its_node_until_it_is_ready(kube: KubeClient) -> None:
    eventually(lambda: initialized(kube, "node-0001"), timeout=60)
    set_ready(kube, "node-0001", "False")
    eventually(lambda: node(kube, "node-0001").has_taint(SHUTDOWN), timeout=30)  # type: ignore[union-attr]
    set_ready(kube, "node-0001", "True")
    eventually(lambda: not node(kube, "node-0001").has_taint(SHUTDOWN), timeout=30)  # type: ignore[union-attr]


def supervisorctl(world: World, *args: str) -> str:
    config = Path(__file__).resolve().parents[2] / "supervisord.conf"
    env = dict(os.environ, PYCCM_RUNTIME_DIR=str(world.workdir / "run"))
    ctl = Path(sys.executable).parent / "supervisorctl"
    return subprocess.run(
        [str(ctl), "-c", str(config), *args], check=False, env=env, capture_output=True, text=True
    ).stdout


def test_a_killed_worker_is_restarted_and_catches_up(world: World, kube: KubeClient) -> None:
    pid = int(supervisorctl(world, "pid", "worker-node").strip())
    os.kill(pid, signal.SIGKILL)
    taint = {"key": UNINITIALIZED, "value": "true", "effect": "NoSchedule"}
    body = {"metadata": {"name": "node-0004"}, "spec": {"taints": [taint]}}
    kube.request("POST", "/api/v1/nodes", body=body)
    eventually(lambda: initialized(kube, "node-0004"), timeout=60)
    assert int(supervisorctl(world, "pid", "worker-node").strip()) != pid


def test_the_manager_restart_loses_no_change(world: World, kube: KubeClient) -> None:
    pid = int(supervisorctl(world, "pid", "manager").strip())
    os.kill(pid, signal.SIGKILL)
    # A label change while the manager is down must still reach the workers afterwards.
    patch = {"metadata": {"labels": {"failure-domain.beta.kubernetes.io/zone": "moved"}}}
    kube.request("PATCH", "/api/v1/nodes/node-0003", body=patch, content_type=MERGE_PATCH)

    def moved() -> bool:
        current = node(kube, "node-0003")
        return (
            current is not None
            and current.metadata.labels.get("topology.kubernetes.io/zone") == "moved"
        )

    eventually(moved, timeout=60)
