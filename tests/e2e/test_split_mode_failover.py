"""Split mode, real processes: two managers with leader election on the kube simulator, on
tcp:// with CURVE keys made by `pyccm keys generate`, each advertising 127.0.0.1, and a
`cloud-node` worker process (openstack provider, OpenStack simulator) started with seed
addresses that are not the leader's.

The worker ends up synced with the leader and nodes get initialized; when the leader dies
(SIGKILL) or hands over (SIGTERM), the worker finds the new leader, re-handshakes, and a
Node created after the failover is initialized. The seeds are the standby's own addresses
in the first test, and in the second a stand-in for a Kubernetes Service over both managers
that sends the worker's SUB to one manager and its DEALER to the other.

Run as a script, it measures the failover (new leader's acquisition to the worker's re-sync)
instead of testing it: `python -m tests.e2e.test_split_mode_failover --runs 3`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from pyccm import lifetime
from pyccm.exposition import REPORT_INTERVAL, pod_registry
from pyccm.logs import parse_time
from pyccm_sim.demo import World, simulators
from tests.support.ports import free_port
from tests.support.tree import Kube, initialized
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

UNINITIALIZED = {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true"}
# Short lease timings keep the tests short; the ratios are upstream's (15 s / 10 s / 2 s).
ELECTION = (
    "--leader-elect-lease-duration=3",
    "--leader-elect-renew-deadline=2",
    "--leader-elect-retry-period=0.5",
)
Endpoints = tuple[str, str]


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def records(self) -> list[dict[str, Any]]:
        """The process's log so far (`--log-format json`: one record per line)."""
        found = []
        for line in self.log.read_text().splitlines():
            if line.startswith("{"):
                found.append(json.loads(line))
        return found

    def first(self, text: str, *, after: float = 0.0) -> float | None:
        """When the first record containing `text` (logged after `after`) was written."""
        for record in self.records():
            stamp = parse_time(record["time"])
            if text in record["msg"] and stamp >= after:
                return stamp
        return None

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
        return self.popen.wait(15)


@dataclass
class Split:
    """The split-mode deployment of one test: keys, managers, a worker, their logs and
    runtime directories, all in `directory`; the simulators are shared."""

    world: World
    directory: Path
    election: tuple[str, ...] = ELECTION
    processes: list[Process] = field(default_factory=list)

    @property
    def keys(self) -> Path:
        return self.directory / "keys"

    @property
    def metrics(self) -> Path:
        return self.directory / "metrics"

    def manager(self, name: str, *, secure_port: int = 0) -> tuple[Process, Endpoints]:
        pub, router = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
        process = self._start(
            name,
            "manager",
            f"--kubeconfig={self.world.kubeconfig}",
            "--controllers=cloud-node",
            f"--secure-port={secure_port}",
            *self.election,
            f"--bus-pub={pub}",
            f"--bus-router={router}",
            f"--bus-curve-dir={self.keys / 'manager'}",
            "--bus-advertise-address=127.0.0.1",
        )
        return process, (pub, router)

    def worker(self, seeds: Endpoints, *, metrics: Path | None = None) -> Process:
        """`metrics`: the worker's own PROMETHEUS_MULTIPROC_DIR (a pod of its own), else the
        directory the managers share."""
        return self._start(
            "worker",
            "worker",
            "cloud-node",
            f"--cloud-config={self.world.cloud_conf}",
            "--concurrent-node-syncs=2",
            f"--bus-pub={seeds[0]}",
            f"--bus-router={seeds[1]}",
            f"--bus-curve-dir={self.keys / 'workers' / 'node'}",
            metrics=metrics,
        )

    def _start(self, name: str, *args: str, metrics: Path | None = None) -> Process:
        log = self.directory / f"{name}.log"
        env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(metrics or self.metrics))
        command = [sys.executable, "-m", "pyccm", *args, "--log-format=json"]
        command.append(f"--runtime-dir={self.directory / 'run' / name}")
        with open(log, "ab") as out:
            popen = lifetime.spawn(command, stdout=out, stderr=out, env=env)
        process = Process(name=name, popen=popen, log=log)
        self.processes.append(process)
        return process

    def leader_changes(self) -> float:
        registry = pod_registry(str(self.metrics))
        value = registry.get_sample_value(
            "pyccm_bus_leader_changes_total", {"worker": "cloud-node"}
        )
        return value or 0.0

    def close(self) -> None:
        for process in self.processes:
            process.stop()


@contextmanager
def split_mode(world: World, election: tuple[str, ...] = ELECTION) -> Iterator[Split]:
    directory = Path(tempfile.mkdtemp(dir=world.workdir))
    split = Split(world=world, directory=directory, election=election)
    generated = subprocess.run(
        [sys.executable, "-m", "pyccm", "keys", "generate", str(split.keys), "--workers", "node"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert generated.returncode == 0, generated.stderr
    split.metrics.mkdir()
    try:
        yield split
    finally:
        split.close()


class ServiceStandIn:
    """One port of a Kubernetes Service as kube-proxy makes it: each new connection goes to
    the next backend that accepts it (round robin from `first`); bytes are copied both ways."""

    def __init__(self, backends: list[str], *, first: int) -> None:
        self._backends = [_host_port(address) for address in backends]
        self._next = first
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"tcp://127.0.0.1:{self._listener.getsockname()[1]}"
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._serve, name="service-stand-in", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            upstream = self._connect()
            with self._lock:
                if self._closed or upstream is None:
                    client.close()
                    if upstream is not None:
                        upstream.close()
                    continue
                self._open += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _connect(self) -> socket.socket | None:
        for _ in self._backends:
            host, port = self._backends[self._next % len(self._backends)]
            self._next += 1
            try:
                upstream = socket.create_connection((host, port), timeout=1)
            except OSError:
                continue  # a dead pod: kube-proxy would not pick it either, once it is out
            upstream.settimeout(None)
            return upstream
        return None

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass  # the other side went away: shut both down below
        for end in (source, sink):
            with suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._listener.close()
            for end in self._open:
                end.close()


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.removeprefix("tcp://").rpartition(":")
    return host, int(port)


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    # Four servers, two Nodes: each test creates one more Node after its failover.
    workdir = Path(tempfile.mkdtemp(prefix="pyccm-e2e-split-"))
    with simulators(workdir, nodes=2, servers=4, latency=0) as world:
        yield world


@pytest.fixture(scope="module")
def kube(world: World) -> Iterator[Kube]:
    kube = Kube(world.kubeconfig)
    yield kube
    kube.client.close()


def became_leader(manager: Process) -> float:
    return wait_for(
        lambda: manager.first("serving workers"), timeout=30, what=f"{manager.name} leads"
    )


def add_node(kube: Kube, name: str) -> None:
    body = {
        "metadata": {"name": name},
        "spec": {"taints": [{**UNINITIALIZED, "effect": "NoSchedule"}]},
    }
    kube.client.request("POST", "/api/v1/nodes", body=body)


@dataclass(frozen=True)
class Failover:
    """Seconds, from the new leader's acquisition (its `became leader` record)."""

    took_over_after_kill: float  # the old leader's death to the new leader's acquisition
    resynced: float  # to the worker's `replica synced` record from the new leader
    initialized: float  # to a Node created then being initialized


def run_failover(
    split: Split,
    kube: Kube,
    *,
    kill: int,
    node: str,
    via_service: bool,
    on_leader: Callable[[Process, Process], None] = lambda worker, leader: None,
) -> Failover:
    """Leader A, standby B, the worker seeded on B (or on a Service over both); `kill` A."""
    first, first_bus = split.manager("manager-a")
    became_leader(first)
    second, second_bus = split.manager("manager-b")
    services: list[ServiceStandIn] = []
    if via_service:
        # SUB to A and DEALER to B: the split a Service can make, which only following the
        # leader's advertised addresses undoes.
        services = [
            ServiceStandIn([first_bus[0], second_bus[0]], first=0),
            ServiceStandIn([first_bus[1], second_bus[1]], first=1),
        ]
        seeds = (services[0].address, services[1].address)
    else:
        seeds = second_bus
    try:
        worker = split.worker(seeds)
        wait_for(
            lambda: worker.first(f"following the leader at {first_bus[0]}, {first_bus[1]}"),
            timeout=30,
            what="the worker follows the leader",
        )
        wait_for(
            lambda: worker.first(f"replica synced from the manager at {first_bus[1]}"),
            timeout=30,
            what="the worker synced from the leader",
        )
        on_leader(worker, first)
        killed = time.time()
        first.popen.send_signal(kill)
        first.popen.wait(15)
        took_over = became_leader_after(second, killed)
        resynced = wait_for(
            lambda: worker.first(
                f"replica synced from the manager at {second_bus[1]}", after=killed
            ),
            timeout=30,
            what="the worker re-synced from the new leader",
        )
        add_node(kube, node)
        wait_for(lambda: initialized(kube, [node]), timeout=60, what=f"{node} initialized")
        done = time.time()
        return Failover(
            took_over_after_kill=took_over - killed,
            resynced=resynced - took_over,
            initialized=done - took_over,
        )
    finally:
        for service in services:
            service.close()


def became_leader_after(manager: Process, moment: float) -> float:
    return wait_for(
        lambda: manager.first("became leader", after=moment),
        timeout=30,
        what=f"{manager.name} takes over",
    )


def test_a_worker_seeded_on_the_standby_follows_the_leader_and_survives_its_sigkill(
    world: World, kube: Kube
) -> None:
    def synced_with_leader(worker: Process, leader: Process) -> None:
        wait_for(
            lambda: initialized(kube, ["node-0000", "node-0001"]),
            timeout=60,
            what="the seeded nodes initialized",
        )
        assert split.leader_changes() == 1

    with split_mode(world) as split:
        failover = run_failover(
            split,
            kube,
            kill=signal.SIGKILL,
            node="node-0002",
            via_service=False,
            on_leader=synced_with_leader,
        )
        worker = split.processes[-1]
        # Its seeds are the new leader's own addresses: back there, nothing more to follow.
        assert worker.first("back to the seed addresses") is not None
        assert split.leader_changes() == 1
    print(f"\nSIGKILL failover: {failover}")


def test_a_worker_behind_a_service_follows_a_sigterm_handover(world: World, kube: Kube) -> None:
    with split_mode(world) as split:
        failover = run_failover(
            split, kube, kill=signal.SIGTERM, node="node-0003", via_service=True
        )
        manager_a = split.processes[0]
        assert manager_a.popen.returncode == 0
        # Through the Service again, then on to the new leader's advertised addresses.
        assert split.leader_changes() == 2
    print(f"\nSIGTERM handover: {failover}")


def scrape(port: int, token: str) -> str:
    """The manager's /metrics over HTTPS (its self-signed certificate is not checked)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(
        f"https://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, context=context, timeout=10) as answer:
        page: str = answer.read().decode()
    return page


def test_a_split_workers_own_metrics_are_in_the_managers_scrape(world: World, kube: Kube) -> None:
    # The worker's pod serves no port and has its own metrics directory: what it measures
    # reaches Prometheus through the manager's /metrics, labelled with its name.
    token = yaml.safe_load(world.kubeconfig.read_text())["users"][0]["user"]["token"]
    port = free_port()
    with split_mode(world) as split:
        manager, bus = split.manager("manager-m", secure_port=port)
        became_leader(manager)
        own = split.directory / "worker-metrics"
        own.mkdir()
        split.worker(bus, metrics=own)
        wait_for(
            lambda: initialized(kube, ["node-0000", "node-0001"]),
            timeout=60,
            what="the seeded nodes initialized",
        )

        def worker_calls() -> tuple[str, list[Sample]] | None:
            """The scrape and the worker's cloud-call counters in it, once they are there."""
            text = scrape(port, token)
            calls = [
                sample
                for family in text_string_to_metric_families(text)
                for sample in family.samples
                if sample.name == "openstack_api_requests_total"
                and sample.labels.get("worker") == "cloud-node"
            ]
            return (text, calls) if calls else None

        page, calls = wait_for(
            worker_calls,
            timeout=REPORT_INTERVAL + 30,
            what="the worker's report in the manager's /metrics",
        )
    assert sum(s.value for s in calls) > 0
    # One HELP line per family: the manager's and the worker's families were merged.
    helps = [line.split()[2] for line in page.splitlines() if line.startswith("# HELP ")]
    assert len(helps) == len(set(helps))


def measure(runs: int, *, lease: str, kinds: str) -> None:
    """Failover timings, for the record (not a test: timings live outside the tests)."""
    duration, deadline, retry = lease.split(",")
    election = (
        f"--leader-elect-lease-duration={duration}",
        f"--leader-elect-renew-deadline={deadline}",
        f"--leader-elect-retry-period={retry}",
    )
    signals = {"SIGKILL": signal.SIGKILL, "SIGTERM": signal.SIGTERM}
    for name in kinds.split(","):
        kill = signals[name]
        for index in range(runs):
            workdir = Path(tempfile.mkdtemp(prefix="pyccm-split-bench-"))
            with ExitStack() as stack:
                world = stack.enter_context(simulators(workdir, nodes=2, servers=3, latency=0))
                kube = Kube(world.kubeconfig)
                stack.callback(kube.client.close)
                split = stack.enter_context(split_mode(world, election))
                result = run_failover(
                    split, kube, kill=kill, node="node-0002", via_service=kill == signal.SIGTERM
                )
            # Logs of a run that failed stay for the reader (the wait raised above).
            shutil.rmtree(workdir, ignore_errors=True)
            print(
                f"{name} run {index + 1}: took over {result.took_over_after_kill:.2f} s after "
                f"the kill; worker re-synced {result.resynced:.2f} s and a new node "
                f"initialized {result.initialized:.2f} s after the acquisition",
                flush=True,
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=measure.__doc__)
    parser.add_argument("--runs", type=int, default=3, help="failovers of each kind")
    parser.add_argument(
        "--lease", default="3,2,0.5", help="lease duration, renew deadline, retry period (s)"
    )
    parser.add_argument("--kinds", default="SIGKILL,SIGTERM", help="SIGKILL and/or SIGTERM")
    args = parser.parse_args()
    measure(args.runs, lease=args.lease, kinds=args.kinds)
