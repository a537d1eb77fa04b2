"""`pyccm demo`: pyccm's main job on the embedded default, end to end.

Starts the Kubernetes and OpenStack simulators as separate processes, seeds a cluster of
uninitialized nodes, LoadBalancer Services and a matching cloud, and runs the real process
tree under supervisord (manager + node, lifecycle, service and route workers, the
openstack provider, the bus over ipc). It shows progress until every node is initialized,
every Service has an Octavia load balancer with a floating IP as its ingress, and the
router has a route for every node's pod CIDR; then it deletes one Service and waits until
its load balancer and floating IP are gone from the cloud. It prints a summary and exits 0
(non-zero with the reason on timeout). Everything lives in a temporary directory that is
removed afterwards unless `--keep` is given.

However the demo ends, everything it started ends with it: Ctrl-C, SIGTERM or SIGHUP stop
the tree and then the simulators (exit 128 + the signal while converging, 0 once `--keep`
has converged), and a SIGKILL of the demo sends each of them SIGTERM from the kernel, upon
which supervisord stops its programs (`pyccm.lifetime`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from pyccm import lifetime
from pyccm.logs import ENV as LOG_FORMAT_ENV
from pyccm.logs import add_log_format_flag
from pyccm.protocol.views import Node, Service
from pyccm_sim.scenario import CLUSTER_CIDR

UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"
READY_URL = re.compile(r"ready at (\S+)")
REPO = Path(__file__).resolve().parents[2]
# `--cluster-name` of the demo tree: its load balancers are `kube_service_demo_<ns>_<name>`.
CLUSTER_NAME = "demo"
# Rows of each summary table: a 5,000-node demo prints a sample, not 10,000 lines.
SUMMARY_ROWS = 50


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "demo",
        help="run pyccm end to end against both simulators and show the result",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--nodes", type=int, default=20, help="nodes in the seeded cluster (default 20)"
    )
    parser.add_argument(
        "--services",
        type=int,
        default=5,
        help="LoadBalancer Services in the seeded cluster (default 5)",
    )
    parser.add_argument(
        "--service-shards",
        type=int,
        default=1,
        help="service worker processes (--shard i/n each; default 1)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds to converge (default 180, plus 0.1 s per node above 1,000)",
    )
    parser.add_argument(
        "--kube-api-qps",
        type=int,
        default=None,
        help="the manager's Kubernetes API budget (default: upstream's 20, or one write per "
        "second for every 10 nodes above 200 nodes)",
    )
    parser.add_argument(
        "--cloud-latency-ms", type=float, default=0.0, help="latency of every cloud call"
    )
    parser.add_argument(
        "--concurrent-node-syncs",
        type=int,
        default=10,
        help="node worker sync threads (default 10; upstream's default is 1)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep running (and the temp dir) after converging"
    )
    add_log_format_flag(parser)
    parser.set_defaults(run=run)


@dataclass(frozen=True)
class World:
    workdir: Path
    kube_url: str
    kubeconfig: Path
    cloud_conf: Path
    cloud_url: str = ""

    @property
    def cluster_id(self) -> str:
        """The kube simulator's kube-system UID: the cluster id the tree tags with."""
        from pyccm.kubeapi.client import KubeClient, KubeSettings
        from pyccm.kubeapi.cluster import read_cluster_id

        client = KubeClient(settings=KubeSettings(kubeconfig=str(self.kubeconfig)))
        try:
            return read_cluster_id(client)
        finally:
            client.close()


def run(args: argparse.Namespace) -> int:
    # Handlers of its own, whatever this process inherited (a background shell's ignored
    # SIGINT): every way of stopping it unwinds the `with` blocks that stop its children.
    lifetime.stop_on_signals()
    # The simulators and the whole tree inherit the format (their logs are in the temp dir).
    os.environ[LOG_FORMAT_ENV] = args.log_format
    workdir = Path(tempfile.mkdtemp(prefix="pyccm-demo-"))
    with ExitStack() as stack:
        world = stack.enter_context(
            simulators(
                workdir,
                nodes=args.nodes,
                services=args.services,
                latency=args.cloud_latency_ms,
            )
        )
        print(f"kube simulator  {world.kube_url}   kubeconfig {world.kubeconfig}")
        print(f"cloud simulator {world.cloud_url}   cloud config {world.cloud_conf}")
        stack.enter_context(
            process_tree(
                world,
                node_syncs=args.concurrent_node_syncs,
                service_shards=args.service_shards,
                kube_api_qps=args.kube_api_qps or demo_kube_qps(args.nodes),
            )
        )
        timeout = args.timeout or demo_timeout(args.nodes)
        code = watch_progress(world, nodes=args.nodes, services=args.services, timeout=timeout)
        if code == 0 and args.keep:
            print(
                f"\nstill running; try: kubectl --kubeconfig {world.kubeconfig} get nodes -o wide"
            )
            print("Ctrl-C (or SIGTERM, SIGHUP) to stop", flush=True)
            _wait_for_a_stop()
    if code == 0 and not args.keep:
        # Logs of a failed run stay for the reader.
        shutil.rmtree(workdir, ignore_errors=True)
    return code


def demo_kube_qps(nodes: int) -> int:
    """Upstream's 20 QPS for a small cluster. Each node costs about four writes (its
    initialization patch, status patch and event, the route's condition), so at 20 QPS
    5,000 nodes would need over 15 minutes whatever the controllers do: a large cluster's
    operator raises the budget, and so does the demo."""
    return max(20, nodes // 10)


def demo_timeout(nodes: int) -> float:
    return 180.0 + 0.1 * max(0, nodes - 1000)


@contextmanager
def simulators(
    workdir: Path,
    *,
    nodes: int,
    latency: float,
    services: int = 0,
    servers: int | None = None,
    cloud_args: tuple[str, ...] = (),
    kube_args: tuple[str, ...] = (),
) -> Iterator[World]:
    """Both simulators; the cloud has `servers` servers (default: one per node)."""
    kubeconfig = workdir / "kubeconfig"
    servers = nodes if servers is None else servers
    cloud_dir = workdir / "cloud"
    with ExitStack() as stack:
        kube_url = stack.enter_context(
            child(
                [
                    *("sim", "kube", "--seed-nodes", str(nodes)),
                    *("--seed-services", str(services), "--kubeconfig-out", str(kubeconfig)),
                    *kube_args,
                ],
                workdir / "kube.log",
            )
        )
        cloud_url = stack.enter_context(
            child(
                [
                    *("sim", "openstack", "--seed-nodes", str(servers)),
                    *("--write-config", str(cloud_dir), "--latency-ms", str(latency)),
                    *cloud_args,
                ],
                workdir / "openstack.log",
            )
        )
        yield World(
            workdir=workdir,
            kube_url=kube_url,
            kubeconfig=kubeconfig,
            cloud_conf=cloud_dir / "cloud.conf",
            cloud_url=cloud_url,
        )


@contextmanager
def child(arguments: list[str], log_path: Path) -> Iterator[str]:
    """A `pyccm` sub-command that prints one `ready at URL` line; yields the URL."""
    command = [sys.executable, "-m", "pyccm", *arguments]
    with open(log_path, "wb") as log:
        process = lifetime.spawn(command, stdout=subprocess.PIPE, stderr=log, cwd=REPO)
        try:
            assert process.stdout is not None
            line = process.stdout.readline().decode()
            match = READY_URL.search(line)
            if match is None:
                raise SystemExit(
                    f"pyccm {arguments[0]} {arguments[1]} did not start: see {log_path}"
                )
            yield match.group(1)
        finally:
            lifetime.stop(process)
            if process.stdout is not None:
                process.stdout.close()


@contextmanager
def process_tree(
    world: World,
    *,
    node_syncs: int = 10,
    kube_api_qps: int = 20,
    service_shards: int = 1,
    service_syncs: int = 10,
    cloud_api_qps: int = 500,
    cluster_cidr: str = CLUSTER_CIDR,
    manager_args: str = "",
    worker_args: str = "",
) -> Iterator[None]:
    """The supervisord tree on `world` (`pyccm tree`, which execs supervisord);
    `manager_args`/`worker_args` add flags (tests, bench)."""
    runtime = world.workdir / "run"
    metrics = runtime / "metrics"
    metrics.mkdir(parents=True, mode=0o700)
    env = dict(
        os.environ,
        PYCCM_RUNTIME_DIR=str(runtime),
        PYCCM_KUBECONFIG=str(world.kubeconfig),
        PYCCM_CLOUD_CONFIG=str(world.cloud_conf),
        PYCCM_CLUSTER_NAME=CLUSTER_NAME,
        # The workers on the bus tag what they create with it (`--cluster-id`).
        PYCCM_CLUSTER_ID=world.cluster_id,
        PYCCM_CONTROLLERS="*",
        PYCCM_SERVICE_SHARDS=str(service_shards),
        PYCCM_CLUSTER_CIDR=cluster_cidr,
        PYCCM_MANAGER_ARGS="--secure-port=0 --leader-elect-retry-period=0.5 "
        f"--kube-api-qps={kube_api_qps} --kube-api-burst={int(kube_api_qps * 1.5)} " + manager_args,
        # A demo-sized cloud API budget: 10 sync threads at ~2 calls each need more than 20/s.
        PYCCM_WORKER_ARGS=f"--node-monitor-period=2 --concurrent-node-syncs={node_syncs} "
        f"--concurrent-service-syncs={service_syncs} "
        f"--cloud-api-qps={cloud_api_qps} --cloud-api-burst={cloud_api_qps} " + worker_args,
        PROMETHEUS_MULTIPROC_DIR=str(metrics),
    )
    # Append mode: supervisord and its children (stdout_logfile=/dev/stdout) each write
    # through their own file offset; with "wb" they would overwrite each other's lines.
    with open(world.workdir / "tree.log", "ab") as log:
        command = [sys.executable, "-m", "pyccm", "tree", f"--config={REPO / 'supervisord.conf'}"]
        with lifetime.running(command, env=env, stdout=log, stderr=log, cwd=REPO):
            yield


def watch_progress(world: World, *, nodes: int, services: int, timeout: float) -> int:
    """Wait for the three jobs, then for one Service's deletion; print the summary."""
    from pyccm.kubeapi.client import KubeClient, KubeSettings

    kube = KubeClient(settings=KubeSettings(kubeconfig=str(world.kubeconfig)))
    cloud = CloudView(world.cloud_url)
    deadline = time.monotonic() + timeout
    started = time.monotonic()
    # Listing 5,000 nodes and the router's routes costs the simulators (and this process)
    # tens of milliseconds: poll a large cluster less often.
    poll = max(0.5, nodes / 2500)
    state = converged_state(kube, cloud)
    while not state.done(nodes=nodes, services=services):
        progress = state.progress(nodes=nodes, services=services)
        print(f"\r{progress}  ({time.monotonic() - started:.0f}s)", end="", flush=True)
        if time.monotonic() > deadline:
            print(f"\nnot converged within {timeout:.0f}s: {progress}")
            print(f"logs: {world.workdir} (kept)")
            return 1
        time.sleep(poll)
        state = converged_state(kube, cloud)
    print(
        f"\r{state.progress(nodes=nodes, services=services)}  ({time.monotonic() - started:.1f}s)\n"
    )
    print_summary(state)
    if not state.services:
        return 0
    code = delete_one_service(kube, cloud, state, deadline=deadline, workdir=world.workdir)
    if code == 0 and len(state.services) > 1:
        code = show_a_plan(world, sorted(state.services, key=lambda s: s.key)[1])
    if code == 0:
        code = collect_an_orphan(world, cloud)
    return code


def pyccm_command(*arguments: str) -> subprocess.CompletedProcess[str]:
    """Another `pyccm` command, as an operator would type it; its output indented."""
    done = subprocess.run(
        [sys.executable, "-m", "pyccm", *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
        **lifetime.tied(),
    )
    for line in (done.stdout + done.stderr).splitlines():
        print(f"    {line}")
    return done


def show_a_plan(world: World, service: Service) -> int:
    """`pyccm plan`: what a changed annotation would do, before anyone makes the change."""
    method = "loadbalancer.openstack.org/lb-method=LEAST_CONNECTIONS"
    print(f"\n$ pyccm plan service {service.key} --annotation {method}")
    done = pyccm_command(
        *("plan", "service", service.key, "--annotation", method),
        *("--kubeconfig", str(world.kubeconfig), "--cloud-config", str(world.cloud_conf)),
        *("--cluster-name", CLUSTER_NAME),
    )
    return done.returncode


def collect_an_orphan(world: World, cloud: CloudView) -> int:
    """`pyccm gc`: a load balancer of this cluster that no Service accounts for (made here
    through the simulator, as a worker killed mid-delete or a finalizer removed by hand
    would leave one) is listed by the dry run and deleted by `--yes`."""
    name = f"kube_service_{CLUSTER_NAME}_default_leaked"
    body = {"name": name, "tags": [name, f"pyccm-cluster:{world.cluster_id}"]}
    request = urllib.request.Request(
        f"{cloud.url}/_sim/loadbalancers",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        leaked = json.load(answer)["id"]
    print(f"\nleft an orphan on purpose: load balancer {leaked} ({name}), no Service for it")
    flags = (
        *("--kubeconfig", str(world.kubeconfig), "--cloud-config", str(world.cloud_conf)),
        *("--cluster-name", CLUSTER_NAME),
    )
    for mode in ("--dry-run", "--yes"):
        print(f"\n$ pyccm gc {mode}")
        if pyccm_command("gc", mode, *flags).returncode != 0:
            return 1
    if any(lb["id"] == leaked for lb in cloud.rows("loadbalancer")):
        print(f"\nthe orphan {leaked} is still there; logs: {world.workdir}")
        return 1
    print("the orphan is gone; every other load balancer is still there.")
    return 0


@dataclass(frozen=True)
class Routed:
    destination: str
    nexthop: str
    node: str


@dataclass(frozen=True)
class State:
    nodes: list[Node]
    services: list[Service]
    load_balancers: dict[str, dict[str, Any]]  # by id
    floating_ips: dict[str, str]  # port id -> floating address
    routes: list[Routed]

    def initialized(self) -> list[Node]:
        return [n for n in self.nodes if not n.has_taint(UNINITIALIZED) and n.spec.provider_id]

    def with_ingress(self) -> list[Service]:
        """Services whose ingress is their load balancer's floating IP, the LB ACTIVE."""
        done = []
        for service in self.services:
            lb = self.load_balancers.get(service.metadata.annotations.get(LB_ID, ""))
            ingress = [i.ip for i in service.status.load_balancer.ingress]
            if lb is None or lb.get("provisioning_status") != "ACTIVE":
                continue
            if ingress and ingress[0] == self.floating_ips.get(lb.get("vip_port_id", "")):
                done.append(service)
        return done

    def routed(self) -> list[Node]:
        """Nodes whose pod CIDR has a route to their InternalIP (one set lookup each: at
        5,000 nodes a per-node intersection of the route sets took the demo ~20 s a poll)."""
        have = {(r.destination, r.nexthop) for r in self.routes}
        return [n for n in self.nodes if (n.spec.pod_cidr, _internal_ip(n)) in have]

    def done(self, *, nodes: int, services: int) -> bool:
        return (
            len(self.initialized()) == nodes
            and len(self.with_ingress()) == services
            and len(self.routed()) == nodes
        )

    def progress(self, *, nodes: int, services: int) -> str:
        return (
            f"nodes initialized {len(self.initialized())}/{nodes}   "
            f"services with a load balancer {len(self.with_ingress())}/{services}   "
            f"pod routes {len(self.routed())}/{nodes}"
        )


LB_ID = "loadbalancer.openstack.org/load-balancer-id"


class CloudView:
    """Reads the OpenStack simulator's inventory (its `/_sim` admin API)."""

    def __init__(self, url: str) -> None:
        self._url = url.rstrip("/")

    @property
    def url(self) -> str:
        return self._url

    def rows(self, kind: str) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self._url}/_sim/resources/{kind}", timeout=10) as answer:
            items: list[dict[str, Any]] = json.load(answer)["items"]
        return items


def converged_state(kube: Any, cloud: CloudView) -> State:
    nodes = msgspec.json.decode(kube.request("GET", "/api/v1/nodes"), type=NodeList).items
    listed = msgspec.json.decode(kube.request("GET", "/api/v1/services"), type=ServiceList).items
    services = [s for s in listed if s.spec.type == "LoadBalancer"]
    owners = {_internal_ip(n): n.name for n in nodes}
    routes = [
        Routed(r["destination"], r["nexthop"], owners.get(r["nexthop"], "?"))
        for router in cloud.rows("router")
        for r in router.get("routes", [])
    ]
    return State(
        nodes=nodes,
        services=services,
        load_balancers={lb["id"]: lb for lb in cloud.rows("loadbalancer")},
        floating_ips={
            f["port_id"]: f["floating_ip_address"] for f in cloud.rows("floatingip") if f["port_id"]
        },
        routes=routes,
    )


def delete_one_service(
    kube: Any, cloud: CloudView, state: State, *, deadline: float, workdir: Path
) -> int:
    """Delete the first Service; wait until it, its LB and its floating IP are gone."""
    service = sorted(state.services, key=lambda s: s.key)[0]
    lb_id = service.metadata.annotations.get(LB_ID, "")
    vip_port = state.load_balancers[lb_id].get("vip_port_id", "")
    path = f"/api/v1/namespaces/{service.namespace}/services/{service.name}"
    print(f"\ndeleting Service {service.key} (load balancer {lb_id}) ...", end="", flush=True)
    kube.request("DELETE", path)
    while time.monotonic() < deadline:
        after = converged_state(kube, cloud)
        gone = (
            all(s.key != service.key for s in after.services)
            and lb_id not in after.load_balancers
            and vip_port not in after.floating_ips
        )
        if gone:
            print(" the Service, its load balancer and its floating IP are gone.")
            return 0
        time.sleep(0.5)
    print(f"\nthe deleted Service's cloud resources were not cleaned up; logs: {workdir}")
    return 1


def print_summary(state: State) -> None:
    rows: list[tuple[str, ...]] = [("NODE", "PROVIDER ID", "TYPE", "ZONE", "ADDRESSES")]
    for node in sorted(state.nodes, key=lambda n: n.name):
        labels = node.metadata.labels
        addresses = ",".join(f"{a.type}={a.address}" for a in node.status.addresses)
        rows.append(
            (
                node.name,
                node.spec.provider_id,
                labels.get("node.kubernetes.io/instance-type", ""),
                labels.get("topology.kubernetes.io/zone", ""),
                addresses,
            )
        )
    _table(rows)
    if state.services:
        print()
        rows = [("SERVICE", "INGRESS", "LOAD BALANCER", "LISTENERS")]
        for service in sorted(state.services, key=lambda s: s.key):
            lb_id = service.metadata.annotations.get(LB_ID, "")
            lb = state.load_balancers.get(lb_id, {})
            ports = ",".join(str(p.port) for p in service.spec.ports)
            ingress = ",".join(i.ip for i in service.status.load_balancer.ingress)
            rows.append(
                (service.key, ingress, f"{lb_id} {lb.get('provisioning_status', '')}", ports)
            )
        _table(rows)
    if state.routes:
        print()
        rows = [("POD CIDR", "NEXT HOP", "NODE")]
        rows += [(r.destination, r.nexthop, r.node) for r in sorted(state.routes, key=_by_node)]
        _table(rows)


def _by_node(route: Routed) -> str:
    return route.node


def _table(rows: Sequence[tuple[str, ...]], *, limit: int = SUMMARY_ROWS) -> None:
    """The header and the first `limit` rows; a line says how many more there are."""
    shown = rows[: limit + 1]
    widths = [max(len(row[i]) for row in shown) for i in range(len(rows[0]) - 1)]
    for row in shown:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
            + "  "
            + row[-1]
        )
    if len(rows) > len(shown):
        print(f"... and {len(rows) - len(shown):,} more")


def _internal_ip(node: Node) -> str:
    return next((a.address for a in node.status.addresses if a.type == "InternalIP"), "")


class NodeList(msgspec.Struct):
    items: list[Node]


class ServiceList(msgspec.Struct):
    items: list[Service]


def _wait_for_a_stop() -> None:
    """Until Ctrl-C, SIGTERM or SIGHUP: a stop asked for once the demo has converged."""
    try:
        while True:
            time.sleep(3600)
    except (KeyboardInterrupt, lifetime.Signalled):
        return
