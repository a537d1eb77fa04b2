"""A real worker process, SIGTERMed in the middle of its work against both simulators, exits
at once (the target is 2 s; supervisord's patience is 10 s).

The route worker used to create routes on a ThreadPoolExecutor, whose threads Python joins at
exit: SIGTERMed with thousands of creates queued, it made every one of them and was killed
after 10 s. Here it is SIGTERMed while one reconcile of 400 nodes is writing the nodes' ports
(a cloud call takes 50 ms and the worker's default budget is 20 calls/s, so that reconcile
needs about 20 s), and must be gone within seconds without finishing it. The lifecycle worker gets
the same treatment while it probes 400 NotReady nodes whose servers are gone.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pyccm import lifetime
from pyccm.kubeapi.client import STRATEGIC_MERGE_PATCH
from pyccm_sim.demo import REPO, World, simulators
from pyccm_sim.scenario import CLUSTER_CIDR, node_name
from tests.support.tree import Cloud, Kube
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

NODES = 400
LATENCY_MS = 50.0
# Enough calls seen to be sure the worker is in the middle of its work.
BUSY = 10
# The target is 2 s (the runner's 1 s drain, then the interpreter's exit). On this shared
# 2-core machine at load 9-11 the route worker took 1.74-1.83 s (3 runs), once 2.14 s and once
# 3.1 s, the excess over the drain being mostly the interpreter's last garbage collection of
# every imported module (0.25-0.6 s here). A bound that a busy machine can break is a benchmark's
# (docs/architecture.md#style-timings-in-bench), so the test holds the behaviour: gone in a few
# seconds, far inside supervisord's
# 10 s, without finishing the reconcile (which needs ~20 s). Before the batches, the worker
# was still running 30 s after SIGTERM.
STOP_WITHIN = 5.0


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


def start_worker(world: World, controller: str, *flags: str) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "pyccm",
        "worker",
        controller,
        "--standalone",
        f"--kubeconfig={world.kubeconfig}",
        f"--cloud-config={world.cloud_conf}",
        *flags,
    ]
    log = open(world.workdir / f"{controller}.log", "wb")  # noqa: SIM115 - closed with the process
    process = lifetime.spawn(command, stdout=log, stderr=log, cwd=REPO)
    log.close()
    return process


def calls(cloud: Cloud, since: int, matches: Callable[[str, str], bool]) -> int:
    return sum(1 for c in cloud.calls(since) if matches(c["method"], c["path"]))


def seconds_to_exit_on_sigterm(process: subprocess.Popen[bytes]) -> tuple[float, int]:
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        code = process.wait(timeout=30)
    finally:
        process.kill()
    return time.monotonic() - started, code


def port_write(method: str, path: str) -> bool:
    return method == "PUT" and path.startswith("/network/v2.0/ports/")


def server_lookup(method: str, path: str) -> bool:
    return method == "GET" and path.startswith("/compute/v2.1/servers/detail?name=")


@pytest.fixture
def routed_world(workdir: Path) -> Iterator[World]:
    with simulators(workdir, nodes=NODES, latency=LATENCY_MS) as world:
        yield world


@pytest.fixture
def outage_world(workdir: Path) -> Iterator[World]:
    """Every node NotReady and no server in the cloud: each node needs its own probe."""
    with simulators(workdir, nodes=NODES, latency=LATENCY_MS, servers=0) as world:
        kube = Kube(world.kubeconfig)
        not_ready = {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
        for index in range(NODES):
            kube.patch(f"/api/v1/nodes/{node_name(index)}/status", not_ready, STRATEGIC_MERGE_PATCH)
        kube.client.close()
        yield world


def test_the_route_worker_stops_at_once_in_the_middle_of_a_reconcile(
    routed_world: World,
) -> None:
    cloud = Cloud(routed_world.cloud_url, routed_world.cloud_conf.parent / "clouds.yaml")
    mark = cloud.mark()
    worker = start_worker(routed_world, "route", f"--cluster-cidr={CLUSTER_CIDR}")
    wait_for(
        lambda: calls(cloud, mark, port_write) >= BUSY,
        timeout=60,
        what="the route worker writing the nodes' address pairs",
    )

    seconds, code = seconds_to_exit_on_sigterm(worker)

    assert code == 0
    assert seconds < STOP_WITHIN
    # It left the reconcile unfinished rather than finishing it first.
    assert calls(cloud, mark, port_write) < NODES


def test_the_lifecycle_worker_stops_at_once_in_the_middle_of_its_probes(
    outage_world: World,
) -> None:
    cloud = Cloud(outage_world.cloud_url, outage_world.cloud_conf.parent / "clouds.yaml")
    mark = cloud.mark()
    worker = start_worker(outage_world, "cloud-node-lifecycle")
    wait_for(
        lambda: calls(cloud, mark, server_lookup) >= BUSY,
        timeout=60,
        what="the lifecycle worker probing the NotReady nodes",
    )

    seconds, code = seconds_to_exit_on_sigterm(worker)

    assert code == 0
    assert seconds < STOP_WITHIN
    assert calls(cloud, mark, server_lookup) < NODES
