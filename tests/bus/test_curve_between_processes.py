"""The flags reach the sockets: a real `pyccm manager` process on tcp:// with CURVE keys
serves a worker holding an authorized key, and a `pyccm worker` process given a key
directory without its client key stops with one line and exit code 2."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyccm import lifetime
from pyccm.flags.addresses import load_client_curve
from pyccm.protocol.messages import SessionId, Topic
from pyccm.workers.runtime.bus import BusClient, BusClientSettings
from pyccm.workers.runtime.replica import Replica
from pyccm_sim.kube.testing import KubeSimHandle, running_kube_sim
from tests.support.bus import KeyDirs
from tests.support.ports import free_port
from tests.support.waiting import eventually


@pytest.fixture
def kube() -> Iterator[KubeSimHandle]:
    with running_kube_sim(seed_nodes=3) as handle:
        yield handle


def test_a_manager_process_on_tcp_serves_an_authorized_worker(
    kube: KubeSimHandle, keys: KeyDirs, tmp_path: Path
) -> None:
    pub, router = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    log = tmp_path / "manager.log"
    with open(log, "wb") as out:
        manager = lifetime.spawn(
            [
                *(sys.executable, "-m", "pyccm", "manager", "--controllers="),
                f"--kubeconfig={kube.kubeconfig_path}",
                *("--secure-port=0", "--leader-elect=false"),
                *(f"--bus-pub={pub}", f"--bus-router={router}"),
                f"--bus-curve-dir={keys.manager}",
                f"--runtime-dir={tmp_path}/run",
            ],
            stdout=out,
            stderr=out,
        )
    replica = Replica()
    client = BusClient(
        settings=BusClientSettings(
            pub_address=pub, router_address=router, curve=load_client_curve(keys.worker)
        ),
        worker="cloud-node",
        session=SessionId(uuid.uuid4().hex),
        view="cloud-node",
        topics=(Topic.NODE,),
        replica=replica,
    )
    client.start()
    try:
        eventually(lambda: len(replica.nodes()) == 3, timeout=20)
    finally:
        client.stop()
        manager.terminate()
        manager.wait(15)
    assert manager.returncode == 0, log.read_text()


def test_a_worker_process_without_its_client_key_exits_2(keys: KeyDirs, tmp_path: Path) -> None:
    (keys.worker / "client.key_secret").unlink()
    result = subprocess.run(
        [
            *(sys.executable, "-m", "pyccm", "worker", "cloud-node", "--cloud-provider=fake"),
            *(
                f"--bus-pub=tcp://127.0.0.1:{free_port()}",
                f"--bus-router=tcp://127.0.0.1:{free_port()}",
            ),
            f"--bus-curve-dir={keys.worker}",
            f"--runtime-dir={tmp_path}/run",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "client.key_secret" in result.stdout + result.stderr
