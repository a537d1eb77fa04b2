"""Two real manager processes share one Lease; a standalone worker runs without a manager."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import msgspec
import pytest

from pyccm import lifetime
from pyccm.kubeapi.client import KubeClient, KubeSettings
from pyccm.kubeapi.errors import NotFound
from pyccm.protocol.views import Node
from pyccm_sim.demo import World, simulators
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"


class NodeList(msgspec.Struct):
    items: list[Node]


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    workdir = Path(tempfile.mkdtemp(prefix="pyccm-e2e-"))
    with ExitStack() as stack:
        yield stack.enter_context(simulators(workdir, nodes=2, latency=0))


@pytest.fixture(scope="module")
def kube(world: World) -> Iterator[KubeClient]:
    client = KubeClient(settings=KubeSettings(kubeconfig=str(world.kubeconfig)))
    yield client
    client.close()


def pyccm(*args: str, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return lifetime.spawn([sys.executable, "-m", "pyccm", *args], stdout=out, stderr=out)


def holder(kube: KubeClient) -> str:
    try:
        data = kube.request(
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/cloud-controller-manager",
        )
    except NotFound:
        return ""
    return str(msgspec.json.decode(data)["spec"].get("holderIdentity") or "")


def test_sigterm_on_the_leader_hands_the_lease_over_fast(world: World, kube: KubeClient) -> None:
    managers = [
        pyccm(
            "manager",
            f"--kubeconfig={world.kubeconfig}",
            "--controllers=",
            "--secure-port=0",
            f"--runtime-dir={world.workdir}/m{index}",
            "--leader-elect-retry-period=0.5",
            log=world.workdir / f"manager-{index}.log",
        )
        for index in range(2)
    ]
    try:
        eventually(lambda: holder(kube) != "", timeout=30)
        first = holder(kube)
        eventually(
            lambda: any(
                f"{first} became leader" in p.read_text()
                for p in world.workdir.glob("manager-*.log")
            )
        )
        leader = managers[leader_index(world, first)]
        leader.send_signal(signal.SIGTERM)
        released = time.monotonic()
        assert leader.wait(15) == 0
        eventually(lambda: holder(kube) not in ("", first), timeout=10)
        # Far below the 15 s lease an unreleased handover would wait.
        assert time.monotonic() - released < 5
    finally:
        for manager in managers:
            if manager.poll() is None:
                manager.terminate()
                manager.wait(15)


def leader_index(world: World, identity: str) -> int:
    """Which manager holds the lease: each logs `<identity> became leader`."""
    for index in range(2):
        if f"{identity} became leader" in (world.workdir / f"manager-{index}.log").read_text():
            return index
    raise AssertionError(f"no manager log names the holder {identity}")


def test_a_standalone_worker_initializes_nodes_without_a_manager(
    world: World, kube: KubeClient
) -> None:
    worker = pyccm(
        "worker",
        "cloud-node",
        "--standalone",
        f"--kubeconfig={world.kubeconfig}",
        f"--cloud-config={world.cloud_conf}",
        log=world.workdir / "standalone.log",
    )
    try:

        def done() -> bool:
            nodes = msgspec.json.decode(kube.request("GET", "/api/v1/nodes"), type=NodeList).items
            return bool(nodes) and all(
                not n.has_taint(UNINITIALIZED) and n.spec.provider_id for n in nodes
            )

        eventually(done, timeout=60)
    finally:
        worker.terminate()
        assert worker.wait(15) == 0
