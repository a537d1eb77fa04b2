"""A manager process that loses its Lease pauses its workers and exits 1
(docs/architecture.md#style-crash-only).

A real `pyccm manager` runs against the kube simulator; the test itself is a worker on
the manager's bus (the same `BusClient` a worker process uses, so its `paused` flag is the
one the sync threads obey). Then the Lease is lost in one of two ways a real cluster
produces: another identity writes the Lease (straight into the simulator's store, as a
candidate on the far side of a partition would), or the API refuses every renewal. Either
way the manager must stop being a leader within its renew deadline, tell its workers to
pause, never write the Lease again, and exit 1 so supervisord restarts it as a candidate.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pyccm import lifetime
from pyccm.protocol.messages import SessionId, Topic
from pyccm.workers.runtime.bus import BusClient, BusClientSettings
from pyccm.workers.runtime.replica import Replica
from pyccm_sim.kube.testing import KubeSimHandle, running_kube_sim
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

LEASE = "cloud-controller-manager"
LEASE_NAMESPACE = "kube-system"
# Upstream's ratios (lease > renew deadline > 1.2 x retry), scaled down so a loss takes ~2 s.
ELECTION_FLAGS = (
    "--leader-elect-lease-duration=4",
    "--leader-elect-renew-deadline=2",
    "--leader-elect-retry-period=0.5",
)
USURPER = "another-replica_0000"


@pytest.fixture
def kube() -> Iterator[KubeSimHandle]:
    with running_kube_sim(seed_nodes=2) as handle:
        yield handle


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    # Short: an ipc:// socket path must fit in 107 bytes, pytest's tmp_path may not.
    path = Path(tempfile.mkdtemp(prefix="pyccm-lease-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def manager(kube: KubeSimHandle, runtime_dir: Path) -> Iterator[subprocess.Popen[bytes]]:
    log = runtime_dir / "manager.log"
    command = [
        *(sys.executable, "-m", "pyccm", "manager"),
        f"--kubeconfig={kube.kubeconfig_path}",
        "--controllers=",
        "--secure-port=0",
        f"--runtime-dir={runtime_dir}/bus",
        *ELECTION_FLAGS,
    ]
    with open(log, "wb") as out:
        process = lifetime.spawn(command, stdout=out, stderr=out)
    yield process
    if process.poll() is None:
        process.terminate()
        process.wait(15)


@dataclass(frozen=True)
class Worker:
    bus: BusClient
    replica: Replica


@pytest.fixture
def worker(manager: subprocess.Popen[bytes], runtime_dir: Path) -> Iterator[Worker]:
    bus = runtime_dir / "bus"
    replica = Replica()
    client = BusClient(
        settings=BusClientSettings(
            pub_address=f"ipc://{bus}/bus-pub.sock", router_address=f"ipc://{bus}/bus-router.sock"
        ),
        worker="cloud-node",
        session=SessionId(uuid.uuid4().hex),
        view="cloud-node",
        topics=(Topic.NODE,),
        replica=replica,
    )
    client.start()
    yield Worker(bus=client, replica=replica)
    client.stop()


def holder(kube: KubeSimHandle) -> str:
    lease = kube.get("leases", LEASE, LEASE_NAMESPACE)
    return "" if lease is None else str(lease["spec"].get("holderIdentity") or "")


def take_over(kube: KubeSimHandle) -> None:
    """Another replica's write: a new holder with a fresh renewTime and a long lease."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    spec = {"holderIdentity": USURPER, "renewTime": now, "leaseDurationSeconds": 60}
    kube.patch(
        "leases",
        LEASE,
        json.dumps({"spec": spec}).encode(),
        namespace=LEASE_NAMESPACE,
        patch_type="application/merge-patch+json",
    )


def refuse_renewals(kube: KubeSimHandle) -> None:
    """The API answers every PUT (the elector's only write to a held Lease) with a 500."""
    kube.set_faults(error_rates={"update": 1.0})


def exit_code(process: subprocess.Popen[bytes], *, timeout: float) -> int | None:
    """The process's exit code, or None if it is still running after `timeout`."""
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        return None


@pytest.mark.parametrize("lose", [take_over, refuse_renewals], ids=["taken-over", "no-renewal"])
def test_a_manager_that_loses_its_lease_pauses_its_workers_and_exits_1(
    kube: KubeSimHandle,
    manager: subprocess.Popen[bytes],
    worker: Worker,
    runtime_dir: Path,
    lose: Callable[[KubeSimHandle], None],
) -> None:
    log = runtime_dir / "manager.log"
    # Serving: the worker got its snapshot of both seeded nodes, and it is not paused.
    eventually(worker.replica.synced.is_set, timeout=30)
    assert {n.name for n in worker.replica.nodes()} == {"node-0000", "node-0001"}
    assert not worker.bus.paused.is_set()
    leader = holder(kube)
    assert leader, "the manager serves workers only while it holds the Lease"

    lose(kube)

    # Renew deadline 2 s + one retry + shutdown; generous for a busy machine.
    assert exit_code(manager, timeout=30) == 1, log.read_text()
    assert worker.bus.paused.is_set()
    assert "leader election lost" in log.read_text()
    # No half-leader write after the loss: the Lease is as the other side left it.
    assert holder(kube) == (USURPER if lose is take_over else leader)
