"""The whole tree at large-cluster scale: `python -m bench.large_cluster [--quick]`.

Both simulators and the real supervisord tree (manager + node, lifecycle, service and route
workers). The kube simulator holds `--nodes` Nodes (kubelet-registered, uninitialized,
each with a pod CIDR, so every node needs a route) and `--services` Services, of which
`--lb-services` are LoadBalancer (every node a member of every pool); the cloud answers
every call after `--latency-ms` and keeps Octavia objects PENDING for
`--provisioning-delay` s. One run goes through these phases, in this order:

1. **converge** from nothing: tree start → every node initialized, every LB Service with
   its ingress, every pool holding every eligible node, every pod CIDR routed (each one
   timed, with the `add_extraroutes` calls it took); the CPU of every process meanwhile,
   both simulators' included, and their share of it;
2. **cold start**: the tree is stopped and started again → every worker synced (bus lag
   0, queues idle) and every LB verified; cloud calls by operation, and the writes (cloud
   and kube, Lease renewals apart) that a restart should not make;
3. **memory** of each process of the tree (supervisord, manager, every worker) once it is
   synced: RSS, and PSS from /proc/<pid>/smaps_rollup (bench.tree_memory's reader; PSS
   splits shared pages between the processes that map them, so only its sum is the tree's
   footprint); the peaks sampled every second, PSS's also while converging;
4. **node churn**: `--churn` nodes join (servers added, Nodes registered) and as many
   leave (Nodes and servers deleted) at once → members converge on every LB; member-update
   calls per pool, then the correctness checks: every pool holds exactly the eligible
   nodes, no LB or floating IP was created twice, nothing leaked, routes match the nodes;
   then **node sync**: clusterloader2's LoadBalancerNodeSyncLatency (below), and members
   converged again;
5. **kubelet churn**: every node's status heartbeat every `--heartbeat-period` s for
   `--kubelet-seconds`, sent as kubelets send it (a strategic-merge PATCH of
   `nodes/<name>/status` bumping the conditions' lastHeartbeatTime, over HTTP) → CPU of
   the manager and of each worker, node deltas published on the bus, and each worker's
   wake-ups (`pyccm_bus_deltas_received_total`, when the tree has it);
6. **lifecycle**: every node reported NotReady (Ready=Unknown, as when kubelets stop
   posting) → Nova calls and lifecycle-worker CPU per `--node-monitor-period`; then, with
   the tree's node and lifecycle workers stopped, upstream's algorithm in this process on
   the same simulator (one monitor pass: InstanceExists then InstanceShutdown, a GET each,
   per NotReady node, one node at a time) as a same-run baseline.

The field's own measures, as kubernetes/perf-tests' clusterloader2 `l4lb` test defines
them, p50 / p90 / p99 (nearest rank) over the LB
Services: **ServiceCreationLatency**, a LoadBalancer Service created → its
`status.loadBalancer.ingress` set, here in phase 1 (the Services exist before the tree
starts, so each one's clock starts with the tree; seen by phase 1's polls, `--poll`
apart); **LoadBalancerNodeSyncLatency**, a node's
`node.kubernetes.io/exclude-from-external-load-balancers` label toggled → every LB Service
has an `UpdatedLoadBalancer` Event newer than the change (its count or lastTimestamp moved;
polled every 0.25 s), `--node-sync-toggles` times (label added, removed, ...), each
toggle's Services pooled.

A second, fresh world measures **SIGTERM**: while the tree converges, each worker is sent
SIGTERM in turn (several rounds; supervisord restarts it) and timed until it has exited.

Writes bench/results/large_cluster.md and .png (`--quick`: a small size, to a temp dir
unless `--out` says otherwise). Times are medians over `--runs`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import msgspec

from bench.faults import ADMIN_TOKEN, gone
from bench.service_scale import (
    CPUS,
    WRITE_METHODS,
    _operation,
    _proc_status,
    _role,
    cpu_seconds,
    processes_of,
    tree_metrics,
)
from pyccm import lifetime
from pyccm.kubeapi.client import MERGE_PATCH, KubeClient, KubeSettings
from pyccm.logs import parse_time
from pyccm.protocol.views import Node, Service
from pyccm.workers.service.policy import is_backend
from pyccm_sim.demo import (
    LB_ID,
    UNINITIALIZED,
    NodeList,
    ServiceList,
    World,
    process_tree,
    simulators,
)
from tests.support.tree import Cloud, supervisorctl
from tests.support.waiting import wait_for

RESULTS = Path(__file__).parent / "results"
REPO = Path(__file__).resolve().parent.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
WORKER_PROGRAMS = (
    "worker-node",
    "worker-lifecycle",
    "worker-service:worker-service-0",
    "worker-route",
)
KUBE_WRITE_VERBS = frozenset({"create", "update", "patch", "delete"})
ELECTION_EVENT = "Lease: LeaderElection"
# A worker still running this long after SIGTERM is killed (supervisord's stopwaitsecs is 15).
STOP_LIMIT = 30.0
# A restarted worker is signalled again only once it has been up this long: a SIGTERM
# during its imports would time nothing but the interpreter's default handler.
SETTLED = 5.0
CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
EXCLUDE_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"
# How often the node-sync phase lists the UpdatedLoadBalancer Events.
EVENT_POLL = 0.25
Sample = tuple[str, dict[str, str], float]


@dataclass(frozen=True)
class Settings:
    nodes: int
    services: int
    lb_services: int
    churn: int
    kubelet_seconds: float
    heartbeat_period: float
    latency_ms: float
    provisioning_delay: float
    kube_qps: int
    cloud_qps: int
    node_syncs: int
    service_syncs: int
    monitor_period: float
    # Times the node-sync phase toggles a node's exclude-from-external-load-balancers label.
    node_sync_toggles: int
    # The cloud's oslo.middleware body limit; None: the simulator's default (the services').
    max_body: int | None
    # How often the phases poll the APIs: cheap at 500 nodes, a real load at 5,000.
    poll: float
    timeout: float
    sigterm_rounds: int

    @property
    def heartbeats_per_second(self) -> float:
        return self.nodes / self.heartbeat_period


# --- the processes ------------------------------------------------------------------------


def tree_processes(world: World) -> dict[str, int]:
    """Pids of supervisord and of every process it runs, by role (`manager`, `route`, ...)."""
    pidfile = world.workdir / "run" / "supervisord.pid"
    try:
        supervisord = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return {}
    found = {"supervisord": supervisord}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == supervisord and argv[0]:
            found[_role(argv)] = int(entry.name)
    return found


def is_simulator(role: str) -> bool:
    return role.endswith("-sim")


def simulator_processes(world: World) -> dict[str, int]:
    return {r: p for r, p in processes_of(world.workdir).items() if is_simulator(r)}


def rss_mb(processes: dict[str, int]) -> dict[str, float]:
    sizes: dict[str, float] = {}
    for role, pid in processes.items():
        status = _proc_status(pid)
        if status is not None:
            sizes[role] = status[1]
    return sizes


def pss_mb(processes: dict[str, int]) -> dict[str, float]:
    """PSS of each process (its smaps_rollup, read by bench.tree_memory), MB."""
    # Imported here: bench.tree_memory imports this module.
    from bench.tree_memory import memory_of

    sizes: dict[str, float] = {}
    for role, pid in processes.items():
        held = memory_of(pid)
        if held is not None:
            sizes[role] = held.pss / 1024
    return sizes


@dataclass
class Peaks:
    """The largest RSS and PSS seen per process, and of the tree, sampled every second."""

    rss_mb: dict[str, float] = field(default_factory=dict)
    tree_mb: float = 0.0
    pss_mb: dict[str, float] = field(default_factory=dict)
    tree_pss_mb: float = 0.0

    def sample(self, world: World) -> None:
        processes = tree_processes(world)
        tree = rss_mb(processes)
        for role, size in {**tree, **rss_mb(simulator_processes(world))}.items():
            self.rss_mb[role] = max(self.rss_mb.get(role, 0.0), size)
        self.tree_mb = max(self.tree_mb, sum(tree.values()))
        proportional = pss_mb(processes)
        for role, size in proportional.items():
            self.pss_mb[role] = max(self.pss_mb.get(role, 0.0), size)
        self.tree_pss_mb = max(self.tree_pss_mb, sum(proportional.values()))


@contextmanager
def sampling(world: World, peaks: Peaks) -> Iterator[None]:
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(1.0):
            peaks.sample(world)

    thread = threading.Thread(target=loop, name="rss-sampler", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@dataclass(frozen=True)
class SimulatorShare:
    """How much of a window's CPU the two simulators took: of the CPU-seconds of the tree
    and the simulators together, and of the machine's capacity (the window's wall time x
    `CPUS`). The bench measures pyccm only as far as the simulators leave it the cores."""

    simulators: float  # CPU-s of kube-sim and openstack-sim
    total: float  # CPU-s of the tree's processes and the simulators
    wall: float  # s

    @property
    def of_cpu(self) -> float:
        return self.simulators / self.total if self.total else 0.0

    @property
    def of_capacity(self) -> float:
        return self.simulators / (self.wall * CPUS) if self.wall else 0.0

    def text(self) -> str:
        return (
            f"{self.simulators:.1f} of {self.total:.1f} CPU-s ({self.of_cpu:.0%}); "
            f"{self.of_capacity:.0%} of the {self.wall:.1f} s x {CPUS} cores"
        )


def simulator_share(cpu: dict[str, float], *, wall: float) -> SimulatorShare:
    """`cpu`: CPU-s by role over a window of `wall` seconds (the bench driver not in it)."""
    return SimulatorShare(
        simulators=sum(v for role, v in cpu.items() if is_simulator(role)),
        total=sum(cpu.values()),
        wall=wall,
    )


class CpuWindow:
    """CPU seconds of the tree's and the simulators' processes over a window, by role."""

    def __init__(self, world: World) -> None:
        self._world = world
        self._started = time.monotonic()
        self._before = self._now()
        self._driver = time.process_time()

    def _now(self) -> dict[str, float]:
        world = self._world
        return cpu_seconds({**tree_processes(world), **simulator_processes(world)})

    def percent(self) -> dict[str, float]:
        """% of one core per role since the window opened (the bench driver included)."""
        wall = time.monotonic() - self._started
        after = self._now()
        used = {role: after[role] - self._before.get(role, 0.0) for role in after}
        used["bench driver"] = time.process_time() - self._driver
        return {role: 100 * seconds / wall for role, seconds in used.items()}


# --- the APIs as the bench reads them ------------------------------------------------------


class KubeView:
    """The kube simulator through its admin kubeconfig: lists, writes, the request log."""

    def __init__(self, world: World) -> None:
        settings = KubeSettings(kubeconfig=str(world.kubeconfig), qps=5000, burst=5000)
        self.client = KubeClient(settings=settings)
        self.url = world.kube_url

    def nodes(self) -> list[Node]:
        listed = self.client.request("GET", "/api/v1/nodes")
        return msgspec.json.decode(listed, type=NodeList).items

    def lb_services(self) -> list[Service]:
        query = urllib.parse.urlencode({"fieldSelector": "spec.type=LoadBalancer"})
        listed = self.client.request("GET", f"/api/v1/services?{query}")
        return msgspec.json.decode(listed, type=ServiceList).items

    def admin(self, method: str, path: str, body: object = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}/_sim/{path}",
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.load(answer)

    def mark(self) -> int:
        mark: int = self.admin("GET", "state")["requests"]
        return mark

    def event_reasons(self, since_wall: float) -> Counter[str]:
        """Events created at or after `since_wall` (whole seconds, as the API stamps them),
        by `kind of the regarded object: reason`."""
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(since_wall)))
        listed = json.loads(self.client.request("GET", "/api/v1/events"))
        return Counter(
            f"{e.get('involvedObject', {}).get('kind', '?')}: {e.get('reason', '?')}"
            for e in listed.get("items", [])
            if (e.get("metadata", {}).get("creationTimestamp") or "") >= since
        )

    def writes(self, since: int) -> Counter[str]:
        """Writes since `since` by `verb resource[/subresource]`."""
        records: list[dict[str, Any]] = self.admin("GET", f"requests?since={since}")
        return Counter(
            f"{r['verb']} {r.get('resource', '?')}"
            + (f"/{r['subresource']}" if r.get("subresource") else "")
            for r in records
            if r.get("verb") in KUBE_WRITE_VERBS
        )


def internal_ip(node: Node) -> str:
    return next((a.address for a in node.status.addresses if a.type == "InternalIP"), "")


def initialized(node: Node) -> bool:
    return bool(node.spec.provider_id) and not node.has_taint(UNINITIALIZED)


def network_ready(node: Node) -> bool:
    condition = node.condition("NetworkUnavailable")
    return condition is not None and condition.status == "False"


def eligible_addresses(nodes: Sequence[Node]) -> frozenset[str]:
    """The members every pool should hold: the backends' InternalIPs."""
    return frozenset(internal_ip(n) for n in nodes if is_backend(n) and internal_ip(n))


class CloudView(Cloud):
    """The e2e tests' view of the OpenStack simulator, plus its `/_sim` API as such."""

    def admin(self, method: str, path: str, body: object = None) -> Any:
        return self._admin(method, path, body)

    def counters(self) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
        """(how many of each kind exist, how many were created/updated/deleted)."""
        answer = self._admin("GET", "/counters")
        return answer["inventory"], answer["counters"]


@dataclass(frozen=True)
class Turnover:
    """Node churn keeps the member count (as many nodes join as leave), so it has
    converged when the count is right *and* the cloud has created and deleted members
    for every joining and leaving node in every pool (re-created members only add)."""

    created: int  # the member counters when churn began
    deleted: int
    to_create: int
    to_delete: int


@dataclass(frozen=True)
class Progress:
    """What converged, from one poll of both APIs."""

    seconds: float
    nodes: int
    initialized: int
    lbs: int
    with_ingress: int
    members: int
    members_wanted: int
    routes: int
    routes_wanted: int
    # Nodes whose NetworkUnavailable condition the route worker has set to False.
    network_ready: int = 0
    # Members created and deleted since churn began, and how many it needs (0 outside churn).
    turnover: tuple[int, int, int, int] = (0, 0, 0, 0)
    # The LB Services (namespace/name) with an ingress.
    ingress_keys: frozenset[str] = frozenset()

    def done(self) -> bool:
        created, deleted, to_create, to_delete = self.turnover
        return (
            self.initialized == self.nodes
            and self.with_ingress == self.lbs
            and self.members == self.members_wanted
            and self.routes == self.routes_wanted
            and self.network_ready == self.nodes
            and created >= to_create
            and deleted >= to_delete
        )

    def text(self) -> str:
        created, deleted, to_create, to_delete = self.turnover
        churn = f" created {created}/{to_create} deleted {deleted}/{to_delete}"
        return (
            f"{self.seconds:6.1f}s nodes {self.initialized}/{self.nodes}  "
            f"LBs {self.with_ingress}/{self.lbs}  members {self.members}/{self.members_wanted}"
            f"{churn if to_create or to_delete else ''}  routes {self.routes}/"
            f"{self.routes_wanted} (conditions {self.network_ready})"
        )


def observe(
    kube: KubeView, cloud: CloudView, *, started: float, turnover: Turnover | None = None
) -> Progress:
    nodes = kube.nodes()
    services = kube.lb_services()
    inventory, counters = cloud.counters()
    members = counters.get("member", {})
    churned = (0, 0, 0, 0)
    if turnover is not None:
        churned = (
            members.get("created", 0) - turnover.created,
            members.get("deleted", 0) - turnover.deleted,
            turnover.to_create,
            turnover.to_delete,
        )
    wanted_members = len(eligible_addresses(nodes)) * sum(len(s.spec.ports) for s in services)
    routes = {(r, hop) for r, hop in cloud.routes()}
    wanted_routes = {(n.spec.pod_cidr, internal_ip(n)) for n in nodes if n.spec.pod_cidr}
    return Progress(
        seconds=time.monotonic() - started,
        nodes=len(nodes),
        initialized=sum(1 for n in nodes if initialized(n)),
        lbs=len(services),
        with_ingress=sum(1 for s in services if s.status.load_balancer.ingress),
        members=inventory.get("member", 0),
        members_wanted=wanted_members,
        routes=len(routes & wanted_routes) - len(routes - wanted_routes),
        routes_wanted=len(wanted_routes),
        network_ready=sum(1 for n in nodes if network_ready(n)),
        turnover=churned,
        ingress_keys=frozenset(s.key for s in services if s.status.load_balancer.ingress),
    )


def wait_converged(
    kube: KubeView,
    cloud: CloudView,
    *,
    started: float,
    settings: Settings,
    what: str,
    turnover: Turnover | None = None,
) -> list[Progress]:
    """Poll until everything converged or `settings.timeout`; the timeline of polls (the
    last one done, unless it timed out: the report then says how far it got)."""
    timeline: list[Progress] = []
    deadline = time.monotonic() + settings.timeout
    shown = 0.0
    while time.monotonic() < deadline:
        timeline.append(observe(kube, cloud, started=started, turnover=turnover))
        if timeline[-1].done():
            print(f"  {what}: {timeline[-1].text()}", flush=True)
            return timeline
        if time.monotonic() - shown >= 10:
            print(f"  {what}: {timeline[-1].text()}", flush=True)
            shown = time.monotonic()
        time.sleep(settings.poll)
    print(f"  {what}: NOT converged within {settings.timeout:.0f}s", flush=True)
    return timeline


def finished(timeline: list[Progress]) -> float:
    """Seconds until the last poll if it found everything converged, else infinity."""
    return timeline[-1].seconds if timeline[-1].done() else float("inf")


def first_time(timeline: list[Progress], reached: Callable[[Progress], bool]) -> float:
    return next((p.seconds for p in timeline if reached(p)), float("inf"))


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile (`share` in 0..100), as clusterloader2 reports them;
    infinity for none."""
    if not values:
        return float("inf")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(len(ordered) * share / 100) - 1)]


@dataclass(frozen=True)
class Latencies:
    """One of clusterloader2's latency measures: seconds per sample, and the samples that
    never arrived."""

    seconds: tuple[float, ...]
    missing: int = 0

    def p(self, share: float) -> float:
        return percentile(self.seconds, share) if not self.missing else float("inf")

    def count(self) -> int:
        return len(self.seconds) + self.missing

    def text(self) -> str:
        shown = ", ".join(f"p{q} {self.p(q):.1f}" for q in (50, 90, 99))
        return shown + (f" (**{self.missing} never**)" if self.missing else "")


class BenchFailed(Exception):
    pass


# --- cloud calls ---------------------------------------------------------------------------


def operations(calls: list[dict[str, Any]]) -> Counter[str]:
    """Calls by `METHOD path-template` (`GET lbaas/pools/{id}/members`); Keystone apart."""
    return Counter("identity" if c["service"] == "identity" else _operation(c) for c in calls)


def cloud_writes(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in calls if c["method"] in WRITE_METHODS and c["service"] != "identity"]


def member_updates_per_pool(calls: list[dict[str, Any]]) -> Counter[str]:
    """Member writes (batch PUT, single POST or DELETE) by the pool they touched."""
    per_pool: Counter[str] = Counter()
    for call in cloud_writes(calls):
        words = str(call["path"]).partition("?")[0].strip("/").split("/")
        if "pools" in words and "members" in words:
            per_pool[words[words.index("pools") + 1]] += 1
    return per_pool


def calls_to(calls: list[dict[str, Any]], suffix: str) -> int:
    return sum(1 for c in calls if str(c["path"]).partition("?")[0].endswith(suffix))


# --- the tree ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TreeStart:
    monotonic: float
    wall: float


@contextmanager
def running_tree(world: World, settings: Settings) -> Iterator[TreeStart]:
    """The supervisord tree with a fresh runtime directory; yields when it started."""
    shutil.rmtree(world.workdir / "run", ignore_errors=True)
    started = TreeStart(monotonic=time.monotonic(), wall=time.time())
    with process_tree(
        world,
        node_syncs=settings.node_syncs,
        kube_api_qps=settings.kube_qps,
        service_syncs=settings.service_syncs,
        cloud_api_qps=settings.cloud_qps,
        # No resync round inside a measurement; upstream's monitor period.
        worker_args=f"--lb-resync-period=1h --node-monitor-period={settings.monitor_period:g}",
    ):
        yield started


def metric_sum(samples: list[Sample], name: str, **labels: str) -> float:
    return sum(
        value
        for sample, have, value in samples
        if sample == name and all(have.get(k) == v for k, v in labels.items())
    )


def by_label(samples: list[Sample], name: str, label: str) -> dict[str, float]:
    found: Counter[str] = Counter()
    for sample, labels, value in samples:
        if sample == name:
            found[labels.get(label, "?")] += int(value)
    return dict(found)


def live_metrics(world: World) -> list[Sample]:
    """The tree's metrics as the manager's /metrics serves them: the live gauges of
    processes that died (a crashed worker) dropped first."""
    from pyccm.manager.http import forget_dead_processes

    forget_dead_processes(str(world.workdir / "run" / "metrics"))
    return tree_metrics(world)


def synced_and_verified(world: World, *, lb_services: int, workers: int) -> bool:
    """Every worker has its snapshot and no lag, the node, service and route queues are
    idle (the lifecycle queue fills every monitor period by design), and the service
    worker has synced (verified) every LB Service at least once."""
    samples = live_metrics(world)
    lags = by_label(samples, "pyccm_bus_worker_lag", "worker")
    busy = sum(
        value
        for name, labels, value in samples
        if name in ("workqueue_depth", "workqueue_unfinished_work_seconds")
        and labels.get("name") != "NodeLifecycle"
    )
    service_syncs = sum(
        value
        for name, labels, value in samples
        if name == "pyccm_sync_total"
        and labels.get("controller", "").startswith("service")
        and labels.get("outcome") == "ok"
    )
    return (
        len(lags) >= workers
        and not any(lags.values())
        and busy == 0
        and service_syncs >= lb_services
    )


def unexpected_exits(world: World) -> list[str]:
    """supervisord's "exited: <program> (...; not expected)" lines: crashes, not stops (a
    worker the SIGTERM drill signalled, or killed after `STOP_LIMIT`, is not a crash)."""
    log = (world.workdir / "tree.log").read_text(errors="replace")
    signalled = ("terminated by SIGTERM", "terminated by SIGKILL")
    return [
        line.split(" WARN ", 1)[-1]
        for line in log.splitlines()
        if "not expected" in line and not any(s in line for s in signalled)
    ]


def milestones(world: World, *, since: float) -> dict[str, float]:
    """Seconds from `since` (wall clock) to the manager's "became leader" and "caches
    synced" lines of the last tree start."""
    found: dict[str, float] = {}
    log = (world.workdir / "tree.log").read_text(errors="replace")
    for line in log.splitlines():
        for key, words in (("leader", "became leader"), ("caches synced", "caches synced")):
            if words in line:
                # A text log line starts with its RFC 3339 UTC time (pyccm.logs).
                at = parse_time(line.split(" ", 1)[0]) - since
                if at >= 0:
                    found.setdefault(key, at)
    return found


# --- kubelets --------------------------------------------------------------------------------


class Kubelets:
    """Node status PATCHes as kubelets send them, over keep-alive HTTP connections. Eight
    threads got ~1,200 PATCHes/s out of the kube simulator: headroom for 500/s."""

    def __init__(self, world: World, *, threads: int = 8) -> None:
        url = urllib.parse.urlsplit(world.kube_url)
        self._host, self._port = url.hostname or "127.0.0.1", url.port or 80
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="kubelet")

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def _connection(self) -> http.client.HTTPConnection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = http.client.HTTPConnection(
                self._host, self._port, timeout=30
            )
        assert isinstance(connection, http.client.HTTPConnection)
        return connection

    def _patch(self, name: str, body: bytes) -> int:
        connection = self._connection()
        connection.request(
            "PATCH",
            f"/api/v1/nodes/{name}/status",
            body=body,
            headers={
                "Authorization": f"Bearer {ADMIN_TOKEN}",
                "Content-Type": "application/strategic-merge-patch+json",
            },
        )
        answer = connection.getresponse()
        answer.read()
        return answer.status

    def send(self, names: Sequence[str], body: Callable[[], bytes]) -> list[int]:
        """One PATCH per name, as fast as the threads go; the HTTP status of each."""
        return list(self._pool.map(lambda name: self._patch(name, body()), names))

    def paced(self, names: Sequence[str], *, rate: float, seconds: float) -> Heartbeats:
        """Heartbeats round-robin over `names` at `rate` per second for `seconds`."""
        tick = 0.1
        started = time.monotonic()
        sent, failed, owed, index = 0, 0, 0.0, 0
        pending: list[Any] = []
        while (now := time.monotonic()) - started < seconds:
            owed += rate * tick
            batch = [names[(index + i) % len(names)] for i in range(int(owed))]
            owed -= len(batch)
            index += len(batch)
            failed += sum(1 for f in pending if f.done() and f.result() != 200)
            pending = [f for f in pending if not f.done()]
            if len(pending) > rate:  # the simulator fell a second behind: count, do not queue
                failed += len(batch)
                batch = []
            pending += [self._pool.submit(self._patch, n, heartbeat_patch()) for n in batch]
            sent += len(batch)
            time.sleep(max(0.0, tick - (time.monotonic() - now)))
        statuses = [f.result() for f in pending]
        failed += sum(1 for s in statuses if s != 200)
        return Heartbeats(sent=sent, failed=failed, seconds=time.monotonic() - started)


@dataclass(frozen=True)
class Heartbeats:
    sent: int
    failed: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.sent / self.seconds


def _stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def heartbeat_patch() -> bytes:
    """What a kubelet's status update changes when nothing else did: every condition's
    lastHeartbeatTime (with the element order its strategic merge patch carries)."""
    stamp = _stamp()
    return msgspec.json.encode(
        {
            "status": {
                "$setElementOrder/conditions": [{"type": c} for c in CONDITIONS],
                "conditions": [{"type": c, "lastHeartbeatTime": stamp} for c in CONDITIONS],
            }
        }
    )


def ready_patch(status: str) -> Callable[[], bytes]:
    """Ready=`status`: "Unknown" is what kube-controller-manager writes when a kubelet
    stops posting; "True" is the kubelet back."""
    reason, message = {
        "Unknown": ("NodeStatusUnknown", "Kubelet stopped posting node status."),
        "True": ("KubeletReady", "kubelet is posting ready status"),
    }[status]

    def body() -> bytes:
        stamp = _stamp()
        condition = {
            "type": "Ready",
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }
        return msgspec.json.encode({"status": {"conditions": [condition]}})

    return body


# --- phase 1: converge from nothing ----------------------------------------------------------


@dataclass(frozen=True)
class Converged:
    seconds: float
    nodes_at: float
    ingress_at: float
    members_at: float
    routes_at: float
    conditions_at: float  # every node's NetworkUnavailable=False written
    timeline: list[Progress]
    milestones: dict[str, float]
    add_extraroutes: int
    calls: Counter[str]
    cpu: dict[str, float]
    # ServiceCreationLatency: each LB Service's ingress, from the tree's start.
    creation: Latencies
    # The tree's largest PSS and RSS (MB) sampled while it converged.
    peak_pss_mb: float
    peak_rss_mb: float

    @property
    def simulators(self) -> SimulatorShare:
        """The simulators' share of the CPU from the tree's start to the last poll."""
        return simulator_share(self.cpu, wall=self.timeline[-1].seconds)


def creation_latencies(timeline: list[Progress]) -> Latencies:
    """Seconds from the tree's start to the first poll showing each LB Service's ingress."""
    first: dict[str, float] = {}
    for progress in timeline:
        for key in progress.ingress_keys - first.keys():
            first[key] = progress.seconds
    return Latencies(seconds=tuple(first.values()), missing=timeline[-1].lbs - len(first))


def converge(bench: Bench, started: TreeStart) -> Converged:
    timeline = wait_converged(
        bench.kube,
        bench.cloud,
        started=started.monotonic,
        settings=bench.settings,
        what="converge",
    )
    cpu = bench.cpu_since_start()
    calls = bench.cloud.calls(0)
    return Converged(
        seconds=finished(timeline),
        nodes_at=first_time(timeline, lambda p: p.initialized == p.nodes),
        ingress_at=first_time(timeline, lambda p: p.with_ingress == p.lbs),
        members_at=first_time(timeline, lambda p: p.members == p.members_wanted),
        routes_at=first_time(timeline, lambda p: p.routes == p.routes_wanted),
        conditions_at=first_time(timeline, lambda p: p.network_ready == p.nodes),
        timeline=timeline,
        milestones=milestones(bench.world, since=started.wall),
        add_extraroutes=calls_to(calls, "/add_extraroutes"),
        calls=operations(calls),
        cpu=cpu,
        creation=creation_latencies(timeline),
        peak_pss_mb=bench.peaks.tree_pss_mb,
        peak_rss_mb=bench.peaks.tree_mb,
    )


# --- phase 2: cold start -----------------------------------------------------------------------


@dataclass(frozen=True)
class ColdStart:
    seconds: float
    milestones: dict[str, float]
    calls: Counter[str]
    cloud_writes: Counter[str]
    kube_writes: Counter[str]
    events: Counter[str]

    @property
    def election_events(self) -> int:
        """The new leader's `LeaderElection` Event on its Lease (client-go's elector writes it
        too): the election's, like the Lease renewals."""
        return self.events[ELECTION_EVENT]

    @property
    def writes(self) -> int:
        """Cloud writes and kube writes, the election's apart (Lease renewals, its Event)."""
        kube = sum(v for k, v in self.kube_writes.items() if "leases" not in k)
        return sum(self.cloud_writes.values()) + kube - self.election_events

    @property
    def object_writes(self) -> Counter[str]:
        """Kube writes other than Lease renewals and Events."""
        return Counter(
            {k: v for k, v in self.kube_writes.items() if "leases" not in k and "events" not in k}
        )


def cold_start(bench: Bench, started: TreeStart, *, cloud_mark: int, kube_mark: int) -> ColdStart:
    settings = bench.settings
    deadline = started.monotonic + settings.timeout
    confirmed = 0
    while confirmed < 2:  # two polls in a row: the queues were not between two keys
        if time.monotonic() > deadline:
            print("  cold start: NOT settled", flush=True)
            break
        done = synced_and_verified(bench.world, lb_services=settings.lb_services, workers=4)
        confirmed = confirmed + 1 if done else 0
        time.sleep(0.25)
    seconds = time.monotonic() - started.monotonic if confirmed >= 2 else float("inf")
    calls = bench.cloud.calls(cloud_mark)
    return ColdStart(
        seconds=seconds,
        milestones=milestones(bench.world, since=started.wall),
        calls=operations(calls),
        cloud_writes=operations(cloud_writes(calls)),
        kube_writes=bench.kube.writes(kube_mark),
        events=bench.kube.event_reasons(started.wall),
    )


# --- phase 3: RSS ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Memory:
    tree_mb: dict[str, float]  # RSS
    simulators_mb: dict[str, float]
    peaks: Peaks
    tree_pss_mb: dict[str, float] = field(default_factory=dict)

    @property
    def tree_total(self) -> float:
        return sum(self.tree_mb.values())

    @property
    def tree_pss_total(self) -> float:
        return sum(self.tree_pss_mb.values())


def memory(bench: Bench) -> Memory:
    processes = tree_processes(bench.world)
    return Memory(
        tree_mb=rss_mb(processes),
        simulators_mb=rss_mb(simulator_processes(bench.world)),
        peaks=bench.peaks,
        tree_pss_mb=pss_mb(processes),
    )


# --- phase 4: node churn -----------------------------------------------------------------------


@dataclass(frozen=True)
class Churn:
    joined: int
    left: int
    seconds: float
    timeline: list[Progress]
    member_updates: Counter[str]  # per pool
    pools: int
    add_extraroutes: int
    remove_extraroutes: int
    calls: Counter[str]
    checks: dict[str, str]  # check -> "ok" or what was wrong

    @property
    def max_updates(self) -> int:
        return max(self.member_updates.values(), default=0)

    def milestones(self) -> str:
        """When the joining nodes were all initialized, the first member of the turnover
        was created, and the last one created or deleted (polls, so to `--poll`)."""

        def turned(p: Progress) -> bool:
            created, deleted, to_create, to_delete = p.turnover
            return created >= to_create and deleted >= to_delete

        found = (
            (
                "every node initialized",
                first_time(self.timeline, lambda p: p.initialized == p.nodes),
            ),
            ("first member created", first_time(self.timeline, lambda p: p.turnover[0] > 0)),
            ("every member created and deleted", first_time(self.timeline, turned)),
        )
        return "; ".join(f"{what} at {at:.1f} s" for what, at in found)


def node_churn(bench: Bench) -> Churn:
    settings, kube, cloud = bench.settings, bench.kube, bench.cloud
    nodes = sorted(kube.nodes(), key=lambda n: n.name)
    count = settings.churn
    stride = max(1, len(nodes) // count)
    leaving = [n.name for n in nodes[::stride][:count]]
    first_new = settings.nodes
    pools = sum(len(s.spec.ports) for s in kube.lb_services())
    members = cloud.counters()[1].get("member", {})
    turnover = Turnover(
        created=members.get("created", 0),
        deleted=members.get("deleted", 0),
        to_create=count * pools,
        to_delete=len(leaving) * pools,
    )
    mark = cloud.mark()
    started = time.monotonic()
    for index in range(first_new, first_new + count):
        cloud.admin("POST", "/servers", {"index": index})
    kube.admin("POST", "seed", {"nodes": count})
    for name in leaving:
        kube.client.request("DELETE", f"/api/v1/nodes/{name}")
        cloud.admin("DELETE", f"/servers/{name}")
    timeline = wait_converged(
        kube, cloud, started=started, settings=settings, what="churn", turnover=turnover
    )
    calls = cloud.calls(mark)
    updates = member_updates_per_pool(calls)
    return Churn(
        joined=count,
        left=len(leaving),
        seconds=finished(timeline),
        timeline=timeline,
        member_updates=updates,
        pools=pools,
        add_extraroutes=calls_to(calls, "/add_extraroutes"),
        remove_extraroutes=calls_to(calls, "/remove_extraroutes"),
        calls=operations(calls),
        checks=correctness(bench, left=set(leaving)),
    )


def correctness(bench: Bench, *, left: set[str]) -> dict[str, str]:
    """What must hold after churn: each check's "ok" or what is wrong."""
    nodes = bench.kube.nodes()
    services = bench.kube.lb_services()
    lbs = {lb["id"]: lb for lb in bench.cloud.rows("loadbalancer")}
    inventory, created = bench.cloud.counters()
    wanted = eligible_addresses(nodes)
    owned = {s.metadata.annotations.get(LB_ID, "") for s in services}
    return {
        "every pool holds exactly the eligible nodes": bench.pools_hold(services, wanted),
        "no load balancer created twice": _equal(
            created.get("loadbalancer", {}).get("created", 0), len(services), "LBs created"
        ),
        "no floating IP created twice": _equal(
            created.get("floatingip", {}).get("created", 0), len(services), "FIPs created"
        ),
        "no load balancer leaked (each one a Service's)": _equal(
            sorted(set(lbs) - owned), [], "LBs no Service names"
        ),
        "no floating IP leaked": _equal(
            inventory.get("floatingip", 0), len(services), "floating IPs in the cloud"
        ),
        "every LB ACTIVE": _equal(
            sorted({lb["provisioning_status"] for lb in lbs.values()}), ["ACTIVE"], "statuses"
        ),
        "routes are exactly the nodes' pod CIDRs": bench.routes_match(nodes),
        "the nodes that left are gone": _equal(
            sorted(left & {n.name for n in nodes}), [], "left but listed"
        ),
    }


def _equal(seen: object, wanted: object, what: str) -> str:
    return "ok" if seen == wanted else f"{what}: {seen!r}, expected {wanted!r}"


# --- phase 4b: node sync (clusterloader2's LoadBalancerNodeSyncLatency) ----------------------


@dataclass(frozen=True)
class Toggle:
    node: str
    excluded: bool  # the label added (True) or removed
    latencies: Latencies  # per LB Service: the change → its UpdatedLoadBalancer Event


@dataclass(frozen=True)
class NodeSync:
    toggles: list[Toggle]
    converged: float  # seconds after the last toggle until every pool was exact again

    @property
    def latencies(self) -> Latencies:
        return Latencies(
            seconds=tuple(s for t in self.toggles for s in t.latencies.seconds),
            missing=sum(t.latencies.missing for t in self.toggles),
        )


def updated_events(kube: KubeView) -> dict[str, frozenset[tuple[str, int, str]]]:
    """Each Service's `UpdatedLoadBalancer` Events: (name, count, lastTimestamp)."""
    query = urllib.parse.urlencode({"fieldSelector": "reason=UpdatedLoadBalancer"})
    listed = json.loads(kube.client.request("GET", f"/api/v1/events?{query}"))
    found: dict[str, set[tuple[str, int, str]]] = {}
    for event in listed.get("items", []):
        regarding = event.get("involvedObject", {})
        if regarding.get("kind") != "Service":
            continue
        key = f"{regarding.get('namespace', '')}/{regarding.get('name', '')}"
        found.setdefault(key, set()).add(
            (
                event["metadata"]["name"],
                int(event.get("count") or 1),
                str(event.get("lastTimestamp") or ""),
            )
        )
    return {key: frozenset(events) for key, events in found.items()}


def toggle_exclusion(bench: Bench, name: str, *, exclude: bool) -> Toggle:
    """Label (or unlabel) `name` and time each LB Service's next UpdatedLoadBalancer Event."""
    services = {s.key for s in bench.kube.lb_services()}
    before = updated_events(bench.kube)
    started = time.monotonic()
    # The API stamps Events to the second: an Event of this toggle is stamped at or after it.
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(time.time())))
    bench.kube.client.request(
        "PATCH",
        f"/api/v1/nodes/{name}",
        body={"metadata": {"labels": {EXCLUDE_LABEL: "true" if exclude else None}}},
        content_type=MERGE_PATCH,
    )
    seen: dict[str, float] = {}
    deadline = started + bench.settings.timeout
    while len(seen) < len(services) and time.monotonic() < deadline:
        events = updated_events(bench.kube)
        at = time.monotonic() - started
        for key in services - seen.keys():
            fresh = events.get(key, frozenset()) - before.get(key, frozenset())
            if any(stamp >= since for _, _, stamp in fresh):
                seen[key] = at
        time.sleep(EVENT_POLL)
    what = "excluded" if exclude else "included again"
    print(f"  node sync: {name} {what}, {len(seen)}/{len(services)} Services updated", flush=True)
    return Toggle(
        node=name,
        excluded=exclude,
        latencies=Latencies(seconds=tuple(seen.values()), missing=len(services) - len(seen)),
    )


def node_sync(bench: Bench) -> NodeSync:
    """`--node-sync-toggles` toggles of one backend node's exclusion label, then members
    converged again (the label gone when the count is even)."""
    settings = bench.settings
    nodes = sorted(bench.kube.nodes(), key=lambda n: n.name)
    backend = next(
        n.name for n in nodes if is_backend(n) and EXCLUDE_LABEL not in n.metadata.labels
    )
    toggles = [
        toggle_exclusion(bench, backend, exclude=index % 2 == 0)
        for index in range(settings.node_sync_toggles)
    ]
    started = time.monotonic()
    timeline = wait_converged(
        bench.kube, bench.cloud, started=started, settings=settings, what="node sync"
    )
    return NodeSync(toggles=toggles, converged=finished(timeline))


# --- phase 5: kubelet churn --------------------------------------------------------------------


@dataclass(frozen=True)
class KubeletChurn:
    heartbeats: Heartbeats
    idle_cpu: dict[str, float]  # % of a core per role, a quiet window before
    cpu: dict[str, float]  # % of a core per role while the kubelets post
    published: dict[str, float]  # node deltas the manager published meanwhile, by channel
    received: dict[str, float] | None  # deltas each worker received (None: no such metric)
    queue_adds: dict[str, float]  # keys added to each workqueue meanwhile


def kubelet_churn(bench: Bench, kubelets: Kubelets) -> KubeletChurn:
    settings = bench.settings
    names = [n.name for n in bench.kube.nodes()]
    quiet = CpuWindow(bench.world)
    time.sleep(min(10.0, settings.kubelet_seconds))
    idle = quiet.percent()
    before = live_metrics(bench.world)
    window = CpuWindow(bench.world)
    heartbeats = kubelets.paced(
        names, rate=settings.heartbeats_per_second, seconds=settings.kubelet_seconds
    )
    cpu = window.percent()
    after = live_metrics(bench.world)
    return KubeletChurn(
        heartbeats=heartbeats,
        idle_cpu=idle,
        cpu=cpu,
        published=_diff(_published(after), _published(before)),
        received=_received(before, after),
        queue_adds=_diff(
            by_label(after, "workqueue_adds_total", "name"),
            by_label(before, "workqueue_adds_total", "name"),
        ),
    )


def _published(samples: list[Sample]) -> dict[str, float]:
    """The last sequence number published on each node channel (`route:node`, ...; a
    tree from before per-controller channels labels it `topic` `node`)."""
    return {
        labels.get("channel", labels.get("topic", "?")): value
        for name, labels, value in samples
        if name == "pyccm_bus_sequence"
        and any(v == "node" or v.endswith(":node") for v in labels.values())
    }


def _received(before: list[Sample], after: list[Sample]) -> dict[str, float] | None:
    name = "pyccm_bus_deltas_received_total"
    if not any(sample == name for sample, _, _ in after):
        return None
    return _diff(by_label(after, name, "worker"), by_label(before, name, "worker"))


def _diff(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {key: value - before.get(key, 0.0) for key, value in after.items()}


# --- phase 6: lifecycle --------------------------------------------------------------------------


@dataclass(frozen=True)
class Lifecycle:
    periods: float
    nova_calls: Counter[str]  # in the window, by operation
    cpu_percent: float  # the lifecycle worker's, % of a core over the window
    baseline_calls: Counter[str]
    baseline_seconds: float
    baseline_nodes: int

    @property
    def calls_per_period(self) -> float:
        return sum(self.nova_calls.values()) / self.periods

    @property
    def baseline_total(self) -> int:
        return sum(self.baseline_calls.values())


def lifecycle(bench: Bench, kubelets: Kubelets) -> Lifecycle:
    settings, cloud = bench.settings, bench.cloud
    names = [n.name for n in bench.kube.nodes()]
    statuses = kubelets.send(names, ready_patch("Unknown"))
    if any(s != 200 for s in statuses):
        raise BenchFailed(f"lifecycle: Ready=Unknown patches failed: {Counter(statuses)}")
    # Let the change reach the worker and one round start before the window opens.
    time.sleep(settings.monitor_period)
    periods = 3
    mark = cloud.mark()
    window = CpuWindow(bench.world)
    time.sleep(periods * settings.monitor_period)
    cpu = window.percent().get("cloud-node-lifecycle", 0.0)
    nova = [c for c in cloud.calls(mark) if c["service"] == "compute"]
    for program in ("worker-lifecycle", "worker-node"):
        supervisorctl(bench.world, "stop", program)
    try:
        baseline_calls, baseline_seconds = upstream_monitor_pass(bench)
    finally:
        kubelets.send(names, ready_patch("True"))
        for program in ("worker-lifecycle", "worker-node"):
            supervisorctl(bench.world, "start", program)
    return Lifecycle(
        periods=periods,
        nova_calls=operations(nova),
        cpu_percent=cpu,
        baseline_calls=baseline_calls,
        baseline_seconds=baseline_seconds,
        baseline_nodes=len(names),
    )


def upstream_monitor_pass(bench: Bench) -> tuple[Counter[str], float]:
    """k8s.io/cloud-provider's `MonitorNodes`, once, with this repository's provider:
    for each node in turn, Ready → skip; else InstanceExists, then InstanceShutdown (the
    OpenStack provider's InstancesV2 GETs the server for each)."""
    from pyccm.provider.errors import ProviderError
    from pyccm.provider.registry import create_cloud
    from pyccm.provider.settings import ProviderSettings

    provider = create_cloud(
        "openstack",
        settings=ProviderSettings(
            cloud_config=bench.world.cloud_conf,
            cluster_name="demo",
            cloud_api_qps=1e6,
            cloud_api_burst=1_000_000,
        ),
    )
    instances = provider.instances()
    assert instances is not None
    nodes = bench.kube.nodes()
    # Authenticate and negotiate before the mark, as a long-running upstream CCM has.
    instances.instance_exists(node=nodes[0])
    mark = bench.cloud.mark()
    started = time.monotonic()
    for node in nodes:
        ready = node.condition("Ready")
        if ready is not None and ready.status == "True":
            continue
        try:
            if instances.instance_exists(node=node):
                instances.instance_shutdown(node=node)
        except ProviderError:
            continue
    seconds = time.monotonic() - started
    provider.close()
    # Only Nova's: the route worker's periodic router reads fall in the same window.
    nova = [c for c in bench.cloud.calls(mark) if c["service"] == "compute"]
    return operations(nova), seconds


# --- the SIGTERM drill --------------------------------------------------------------------------


@dataclass(frozen=True)
class Stop:
    program: str
    seconds: float
    at: str  # the progress when the signal went


@dataclass(frozen=True)
class Drill:
    stops: list[Stop]
    # Crashes of that world's tree (a SIGTERM the drill sent is not one).
    exits: list[str]


def sigterm_drill(settings: Settings) -> Drill:
    """A fresh world converging; each worker SIGTERMed in turn, `sigterm_rounds` times."""
    stops: list[Stop] = []
    with (
        world_of(settings, prefix="pyccm-large-sigterm-") as world,
        running_tree(world, settings) as started,
    ):
        kube, cloud = KubeView(world), cloud_of(world)
        # Work under way first: some node initialized (the node worker is mid-batch).
        wait_for(
            lambda: observe(kube, cloud, started=started.monotonic).initialized,
            timeout=settings.timeout,
            what="a node initialized",
            poll=0.5,
        )
        signalled: dict[str, int] = {}
        for _ in range(settings.sigterm_rounds):
            for program in WORKER_PROGRAMS:
                progress = partial(observe, kube, cloud, started=started.monotonic)
                stops.append(sigterm(world, program, progress, after=signalled))
        kube.client.close()
        exits = unexpected_exits(world)
    return Drill(stops=stops, exits=exits)


def sigterm(
    world: World, program: str, progress: Callable[[], Progress], *, after: dict[str, int]
) -> Stop:
    """SIGTERM `program`'s current process (a new one, if it was signalled before: the
    others' turns give supervisord time to restart it); seconds until it has exited, and
    a SIGKILL after `STOP_LIMIT` so a worker that ignores SIGTERM cannot stall the drill."""
    pid = wait_for(
        lambda: _new_pid(world, program, after.get(program, 0)),
        timeout=60,
        what=f"{program} running",
    )
    after[program] = pid
    at = progress().text()
    os.kill(pid, signal.SIGTERM)
    signalled = time.monotonic()
    while not gone(pid) and time.monotonic() - signalled < STOP_LIMIT:
        time.sleep(0.01)
    seconds = time.monotonic() - signalled
    if not gone(pid):
        os.kill(pid, signal.SIGKILL)
    return Stop(program=program.rsplit(":", maxsplit=1)[-1], seconds=seconds, at=at)


def _pid(world: World, program: str) -> int:
    text = supervisorctl(world, "pid", program).strip()
    return int(text) if text.isdigit() else 0


def _new_pid(world: World, program: str, old: int) -> int:
    """`program`'s pid if it runs in another process than `old` and has been up for
    `SETTLED` seconds (past its imports, holding its snapshot, working), else 0."""
    pid = _pid(world, program)
    return 0 if pid == old or _uptime(pid) < SETTLED else pid


def _uptime(pid: int) -> float:
    try:
        started = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return 0.0
    since_boot = float(Path("/proc/uptime").read_text().split()[0])
    return since_boot - started / CLOCK_TICKS


# --- one run -------------------------------------------------------------------------------------


@dataclass
class Bench:
    settings: Settings
    world: World
    kube: KubeView
    cloud: CloudView
    peaks: Peaks = field(default_factory=Peaks)
    tree_cpu_start: dict[str, float] = field(default_factory=dict)

    def mark_cpu(self) -> None:
        """Call just before the tree starts: the simulators' CPU so far (their start and
        seeding) is left out of `cpu_since_start`; the tree's processes start from 0."""
        self.tree_cpu_start = cpu_seconds(simulator_processes(self.world))

    def cpu_since_start(self) -> dict[str, float]:
        now = cpu_seconds({**tree_processes(self.world), **simulator_processes(self.world)})
        return {role: now[role] - self.tree_cpu_start.get(role, 0.0) for role in now}

    def pools_hold(self, services: Sequence[Service], wanted: frozenset[str]) -> str:
        """Every pool of every LB Service's load balancer, read through Octavia, holds
        exactly the eligible nodes (one member per node, on one of the Service's node
        ports); "ok" or the first few differences."""
        from pyccm.provider.openstack.loadbalancer.resources import Member, Pool

        client = self._client()
        pools = client.list_all(Pool, "load-balancer", "/lbaas/pools", key="pools", request="b")
        by_lb: dict[str, list[Pool]] = {}
        for pool in pools:
            for ref in pool.loadbalancers:
                by_lb.setdefault(ref.id, []).append(pool)

        def check(service: Service) -> list[str]:
            lb_id = service.metadata.annotations.get(LB_ID, "")
            ports = {p.node_port for p in service.spec.ports}
            found = by_lb.get(lb_id, [])
            wrong = [] if len(found) == len(ports) else [f"{service.key}: {len(found)} pools"]
            for pool in found:
                members = client.list_all(
                    Member,
                    "load-balancer",
                    f"/lbaas/pools/{pool.id}/members",
                    key="members",
                    request="b",
                )
                addresses = [m.address for m in members]
                if set(addresses) != wanted or len(addresses) != len(wanted):
                    missing, extra = len(wanted - set(addresses)), len(set(addresses) - wanted)
                    wrong.append(f"{service.key}: {missing} missing, {extra} extra")
                if not {m.protocol_port for m in members} <= ports:
                    wrong.append(f"{service.key}: a member on a port not the Service's")
            return wrong

        with ThreadPoolExecutor(8) as pool_threads:
            problems = [p for found in pool_threads.map(check, services) for p in found]
        return "ok" if not problems else f"{len(problems)} wrong: {problems[:3]}"

    def routes_match(self, nodes: Sequence[Node]) -> str:
        routes = sorted(self.cloud.routes())
        wanted = sorted({(n.spec.pod_cidr, internal_ip(n)) for n in nodes if n.spec.pod_cidr})
        if routes == wanted:
            return "ok"
        return f"{len(set(wanted) - set(routes))} missing, {len(set(routes) - set(wanted))} extra"

    def _client(self) -> Any:
        from pyccm.provider.registry import create_cloud
        from pyccm.provider.settings import ProviderSettings

        provider: Any = create_cloud(
            "openstack",
            settings=ProviderSettings(
                cloud_config=self.world.cloud_conf,
                cluster_name="demo",
                cloud_api_qps=1e6,
                cloud_api_burst=1_000_000,
            ),
        )
        return provider.client


@dataclass(frozen=True)
class Run:
    converged: Converged
    cold: ColdStart
    memory: Memory
    churn: Churn
    node_sync: NodeSync
    kubelets: KubeletChurn
    lifecycle: Lifecycle
    exits: list[str]
    commit: str


def cloud_of(world: World) -> CloudView:
    return CloudView(world.cloud_url, world.cloud_conf.parent / "clouds.yaml")


@contextmanager
def world_of(settings: Settings, *, prefix: str) -> Iterator[World]:
    """Both simulators, seeded; the directory goes afterwards unless the run failed."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    cloud_args: tuple[str, ...] = ("--provisioning-delay", str(settings.provisioning_delay))
    if settings.max_body is not None:
        cloud_args += ("--max-request-body-size", str(settings.max_body))
    kube_args = (
        "--seed-cluster-ip-services",
        str(settings.services - settings.lb_services),
    )
    try:
        with simulators(
            workdir,
            nodes=settings.nodes,
            services=settings.lb_services,
            latency=settings.latency_ms,
            cloud_args=cloud_args,
            kube_args=kube_args,
        ) as world:
            yield world
            crashed = unexpected_exits(world)
    except BaseException:
        print(f"  logs kept in {workdir}", file=sys.stderr)
        raise
    if crashed:
        print(f"  {len(crashed)} crashes; logs kept in {workdir}", file=sys.stderr)
    else:
        shutil.rmtree(workdir, ignore_errors=True)


def one_run(settings: Settings) -> Run:
    with ExitStack() as stack:
        world = stack.enter_context(world_of(settings, prefix="pyccm-large-"))
        bench = Bench(settings=settings, world=world, kube=KubeView(world), cloud=cloud_of(world))
        stack.callback(bench.kube.client.close)
        kubelets = Kubelets(world)
        stack.callback(kubelets.close)
        stack.enter_context(sampling(world, bench.peaks))
        bench.mark_cpu()
        with running_tree(world, settings) as started:
            converged = converge(bench, started)
        print(f"  converged in {converged.seconds:.1f}s; restarting the tree", flush=True)
        cloud_mark, kube_mark = bench.cloud.mark(), bench.kube.mark()
        with running_tree(world, settings) as started:
            cold = cold_start(bench, started, cloud_mark=cloud_mark, kube_mark=kube_mark)
            print(f"  cold start {cold.seconds:.1f}s", flush=True)
            held = memory(bench)
            churn = node_churn(bench)
            print(f"  churn {churn.seconds:.1f}s, checks {churn.checks}", flush=True)
            synced = node_sync(bench)
            kubelet = kubelet_churn(bench, kubelets)
            print(f"  kubelets {kubelet.heartbeats.rate:.0f}/s", flush=True)
            cycle = lifecycle(bench, kubelets)
            print(f"  lifecycle {cycle.calls_per_period:.0f} Nova calls/period", flush=True)
            exits = unexpected_exits(world)
        return Run(
            converged=converged,
            cold=cold,
            memory=held,
            churn=churn,
            node_sync=synced,
            kubelets=kubelet,
            lifecycle=cycle,
            exits=exits,
            commit=commit(),
        )


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, check=False
        ).stdout.strip()

    head = git("rev-parse", "--short", "HEAD")
    if not head:
        return "(unknown: not a git checkout)"
    dirty = len(git("status", "--porcelain", "--untracked-files=no").splitlines())
    return head + (f" + {dirty} uncommitted files" if dirty else "")


# --- the report ----------------------------------------------------------------------------------


def median_of(runs: Sequence[Run], value: Callable[[Run], float]) -> str:
    """`**median**` and, with several runs, each run's value."""
    values = [value(r) for r in runs]
    text = f"**{statistics.median(values):.1f}**"
    return text if len(values) == 1 else f"{text} (runs {', '.join(f'{v:.1f}' for v in values)})"


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def render(runs: Sequence[Run], drill: Drill, *, settings: Settings, quick: bool) -> str:
    run = sorted(runs, key=lambda r: r.converged.seconds)[len(runs) // 2]
    lines = [
        f"# The whole tree at scale: {settings.nodes:,} nodes, {settings.services:,} Services "
        f"({settings.lb_services:,} LoadBalancer)" + (" (`--quick`)" if quick else ""),
        "",
        *_setup(settings, runs),
        "",
        "| phase | measured | target | |",
        "| --- | --- | --- | --- |",
        *_headline(runs, run, drill, settings=settings),
        "",
        *_converge_section(run),
        *_field_section(run),
        *_cold_section(run),
        *_memory_section(run),
        *_churn_section(run, settings=settings),
        *_kubelet_section(run, settings=settings),
        *_lifecycle_section(run, settings=settings),
        *_sigterm_section(drill.stops),
    ]
    return "\n".join(lines) + "\n"


def _setup(settings: Settings, runs: Sequence[Run]) -> list[str]:
    s = settings
    return [
        f"OpenStack simulator: {s.latency_ms:g} ms per call, Octavia provisioning "
        f"{s.provisioning_delay:g} s. Every node is a member of every pool of every LB "
        f"Service (Services with 2 ports have 2 pools). Tree: manager `--kube-api-qps "
        f"{s.kube_qps}`; workers `--cloud-api-qps {s.cloud_qps}` each, "
        f"`--concurrent-node-syncs {s.node_syncs}`, `--concurrent-service-syncs "
        f"{s.service_syncs}`, `--node-monitor-period {s.monitor_period:g}s`, "
        f"`--lb-resync-period 1h` (no resync round inside a measurement). Cloud request body "
        f"limit: {_body_limit(s.max_body)}. {len(runs)} run(s) "
        f"of the main phases, on commit {runs[0].commit}; {CPUS} CPUs shared with other work. "
        f"Re-run: `python -m bench.large_cluster` (`--quick` for a small size).",
    ]


def _body_limit(limit: int | None) -> str:
    if limit is None:
        return "the simulator's default (the OpenStack services' 114,688 bytes)"
    return "none" if limit == 0 else f"{limit:,} bytes"


def _not_done(timeline: list[Progress]) -> str:
    last = timeline[-1]
    return "" if last.done() else f" — **NOT converged**, last seen: {last.text().strip()}"


def _headline(runs: Sequence[Run], run: Run, drill: Drill, *, settings: Settings) -> list[str]:
    c, cold, churn, kube, cycle = run.converged, run.cold, run.churn, run.kubelets, run.lifecycle
    synced = run.node_sync
    stops = drill.stops
    tree_mb = run.memory.tree_total
    per_process = ", ".join(f"{k} {v:.0f}" for k, v in sorted(run.memory.tree_mb.items()))
    pss = run.memory.tree_pss_total
    pss_per_process = ", ".join(f"{k} {v:.0f}" for k, v in sorted(run.memory.tree_pss_mb.items()))
    failed = {k: v for k, v in churn.checks.items() if v != "ok"}
    worst = max((s.seconds for s in stops), default=float("nan"))
    manager_cpu = kube.cpu.get("manager", 0.0)
    received = (
        "worker wake-ups: TODO, the tree has no `pyccm_bus_deltas_received_total` yet"
        if kube.received is None
        else "deltas received per worker: "
        + ", ".join(f"{k} {v:.0f}" for k, v in sorted(kube.received.items()))
    )
    woken = kube.received is not None and not any(kube.received.values())
    ratio = cycle.baseline_total / max(cycle.calls_per_period, 1.0)
    routes_per_call = settings.nodes / max(c.add_extraroutes, 1)
    return [
        "| converge from nothing: every node initialized, LB Service with ingress, pool "
        f"full, pod CIDR routed (s) | {median_of(runs, lambda r: r.converged.seconds)}: nodes "
        f"{c.nodes_at:.1f}, ingress {c.ingress_at:.1f}, members {c.members_at:.1f}, routes "
        f"{c.routes_at:.1f} (NetworkUnavailable=False on every node {c.conditions_at:.1f})"
        f"{_not_done(c.timeline)} | ≤ 60 s (the median) | "
        f"{verdict(statistics.median(r.converged.seconds for r in runs) <= 60)} |",
        f"| ServiceCreationLatency (clusterloader2 `l4lb`): {c.creation.count()} LB Services, "
        f"the tree's start → ingress (s) | {c.creation.text()} | p99 ≤ 40 s | "
        f"{verdict(c.creation.p(99) <= 40)} |",
        "| the simulators' CPU while converging: of the CPU-s of the tree and both simulators; "
        f"of the wall time x cores | {c.simulators.text()} | | |",
        f"| routes: {settings.nodes:,} pod CIDRs routed from nothing (s) | "
        f"{median_of(runs, lambda r: r.converged.routes_at)}; {c.add_extraroutes} "
        f"`add_extraroutes` calls ({routes_per_call:.0f} routes per call) | ≤ 60 s | "
        f"{verdict(c.routes_at <= 60)} |",
        "| cold start: tree restarted → every worker synced, every LB verified (s) | "
        f"{median_of(runs, lambda r: r.cold.seconds)}; {sum(cold.calls.values())} cloud calls, "
        f"**{sum(cold.cloud_writes.values())} cloud writes**, **{sum(cold.object_writes.values())}"
        f" kube object writes**, **{_events(cold.kube_writes)} Event writes** "
        f"({_counts(cold.events)}; Lease renewals apart: {_leases(cold.kube_writes)}) | 0 "
        "writes besides the election's | "
        f"{verdict(cold.writes == 0)} |",
        f"| RSS of the whole tree once synced (MB) | **{tree_mb:.0f}** ({per_process}); peak "
        f"during the run {run.memory.peaks.tree_mb:.0f} | (the budget is PSS: RSS counts "
        "each shared page once per process) | |",
        f"| PSS of the whole tree once synced (MB) | **{pss:.0f}** ({pss_per_process}) | "
        f"≤ 300 MB | {verdict(pss <= 300)} |",
        f"| PSS of the whole tree at its peak while converging (MB) | **{c.peak_pss_mb:.0f}** "
        f"(RSS {c.peak_rss_mb:.0f}) | ≤ 350 MB | {verdict(c.peak_pss_mb <= 350)} |",
        f"| node churn: {churn.joined} join and {churn.left} leave at once → every pool "
        f"converged (s) | {median_of(runs, lambda r: r.churn.seconds)}"
        f"{_not_done(churn.timeline)} | ≤ 60 s | "
        f"{verdict(churn.seconds <= 60)} |",
        f"| member-update calls per pool in that churn ({churn.pools} pools) | max "
        f"**{churn.max_updates}**, median "
        f"{statistics.median(churn.member_updates.values() or [0]):.0f} | ≤ 2 | "
        f"{verdict(churn.max_updates <= 2)} |",
        "| correctness after churn: pools exact, no LB/FIP created twice, nothing leaked, "
        f"routes exact | {failed or 'all ok'} | all ok | {verdict(not failed)} |",
        "| LoadBalancerNodeSyncLatency (clusterloader2 `l4lb`): a node's exclusion label "
        f"toggled → an UpdatedLoadBalancer Event on every LB Service, {len(synced.toggles)} "
        f"toggles x {synced.toggles[0].latencies.count() if synced.toggles else 0} Services (s) "
        f"| {synced.latencies.text()} | p99 ≤ 30 s | {verdict(synced.latencies.p(99) <= 30)} |",
        f"| kubelet churn: {kube.heartbeats.rate:.0f} heartbeats/s (PATCH nodes/status over "
        f"HTTP) for {kube.heartbeats.seconds:.0f} s: manager CPU (% of a core) | "
        f"**{manager_cpu:.0f}** (idle {kube.idle_cpu.get('manager', 0.0):.0f}) | ≤ 25 % | "
        f"{verdict(manager_cpu <= 25)} |",
        f"| worker wake-ups for those heartbeats | {sum(kube.published.values()):.0f} node "
        "deltas published; "
        f"{received} | 0 | {'TODO' if kube.received is None else verdict(woken)} |",
        f"| lifecycle: {cycle.baseline_nodes:,} nodes NotReady, Nova calls per "
        f"{settings.monitor_period:g} s monitor period | **{cycle.calls_per_period:.0f}**; "
        f"lifecycle worker {cycle.cpu_percent:.0f} % of a core | ≤ 10 | "
        f"{verdict(cycle.calls_per_period <= 10)} |",
        "| upstream's monitor pass on the same simulator (GET per NotReady node, in turn) | "
        f"{cycle.baseline_total:,} Nova calls in {cycle.baseline_seconds:.1f} s: "
        f"**{ratio:.0f} x** pyccm's calls per period | | |",
        f"| SIGTERM while converging: slowest exit of {len(stops)} (s) | **{worst:.2f}** "
        f"({_slowest(stops)}) | ≤ 2 s | {verdict(worst <= 2) if stops else 'not run'} |",
        "| processes that exited unexpectedly (supervisord's log): main phases; SIGTERM drill | "
        f"{'; '.join(run.exits) or 'none'}; {'; '.join(drill.exits) or 'none'} | none | "
        f"{verdict(not run.exits and not drill.exits)} |",
    ]


def _floats(values: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.0f}" for k, v in sorted(values.items())) or "none"


def _milestones(found: dict[str, float]) -> str:
    return "; ".join(f"manager {k} at {v:.1f} s" for k, v in found.items()) or "no milestones"


def _events(writes: Counter[str]) -> int:
    return sum(v for k, v in writes.items() if "events" in k)


def _leases(writes: Counter[str]) -> int:
    return sum(v for k, v in writes.items() if "leases" in k)


def _slowest(stops: Sequence[Stop]) -> str:
    slowest: dict[str, float] = {}
    for stop in stops:
        slowest[stop.program] = max(slowest.get(stop.program, 0.0), stop.seconds)
    return ", ".join(f"{k} {v:.2f}" for k, v in sorted(slowest.items()))


def _counts(counts: Counter[str], *, top: int = 12) -> str:
    shown = ", ".join(f"`{k}` {v:,}" for k, v in counts.most_common(top))
    rest = sum(counts.values()) - sum(v for _, v in counts.most_common(top))
    return (shown + (f", others {rest:,}" if rest else "")) or "none"


def _cpu_table(columns: dict[str, dict[str, float]], unit: str) -> list[str]:
    roles = sorted({role for values in columns.values() for role in values})
    return [
        f"| process | {' | '.join(columns)} |",
        "| --- |" + " ---: |" * len(columns),
        *(
            f"| {role} | "
            + " | ".join(
                f"{values[role]:.1f}{unit}" if role in values else "n/a"
                for values in columns.values()
            )
            + " |"
            for role in roles
        ),
    ]


def _converge_section(run: Run) -> list[str]:
    c = run.converged
    return [
        "## Converge from nothing",
        "",
        f"{c.seconds:.1f} s from the tree's start ({_milestones(c.milestones)}). CPU seconds "
        "used meanwhile, by process (the simulators' from the tree's start: their own start "
        "and seeding apart):",
        "",
        *_cpu_table({"CPU s": c.cpu}, ""),
        "",
        f"The simulators' share: {c.simulators.text()} (the tree and both simulators share "
        "the machine's cores with each other and with any other work on it).",
        "",
        f"Cloud calls by operation: {_counts(c.calls)}.",
        "",
    ]


def _field_section(run: Run) -> list[str]:
    creation, synced = run.converged.creation, run.node_sync
    rows = [
        f"| ServiceCreationLatency | {creation.count()} | {_quantiles(creation)} |",
        *(
            f"| LoadBalancerNodeSyncLatency, {t.node} "
            f"{'excluded' if t.excluded else 'included again'} | {t.latencies.count()} | "
            f"{_quantiles(t.latencies)} |"
            for t in synced.toggles
        ),
        f"| LoadBalancerNodeSyncLatency, all toggles | {synced.latencies.count()} | "
        f"{_quantiles(synced.latencies)} |",
    ]
    return [
        "## The field's measures (clusterloader2 `l4lb`)",
        "",
        "As kubernetes/perf-tests' clusterloader2 `l4lb` test defines them, nearest-rank "
        "percentiles over the LB Services (s). ServiceCreationLatency: the Services exist "
        "when the tree starts, so each one's clock starts with the tree; its ingress is seen "
        f"by phase 1's polls ({run.converged.timeline[0].seconds:.1f} s after the start, then "
        "every `--poll`). LoadBalancerNodeSyncLatency: one backend node's "
        f"`{EXCLUDE_LABEL}` label added, then removed; each LB Service's time until an "
        "`UpdatedLoadBalancer` Event of it changed (count or lastTimestamp, stamped at or "
        f"after the change's second), Events listed every {EVENT_POLL:g} s. Members were "
        f"exact again {synced.converged:.1f} s after the last toggle. No upstream baseline: "
        "this bench runs upstream's algorithm for the lifecycle pass only.",
        "",
        "| measure | samples | p50 | p90 | p99 | max |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        *rows,
        "",
    ]


def _quantiles(latencies: Latencies) -> str:
    values = [latencies.p(q) for q in (50, 90, 99)]
    top = max(latencies.seconds, default=float("inf")) if not latencies.missing else float("inf")
    return " | ".join(f"{v:.1f}" for v in (*values, top))


def _cold_section(run: Run) -> list[str]:
    cold = run.cold
    return [
        "## Cold start",
        "",
        f"{cold.seconds:.1f} s from the restarted tree's start until every worker reported no "
        "bus lag, every workqueue was idle (twice in a row, 0.25 s apart) and the service "
        f"worker had synced every LB Service once ({_milestones(cold.milestones)}).",
        "",
        f"* cloud calls: {_counts(cold.calls)};",
        f"* cloud writes: {_counts(cold.cloud_writes)};",
        f"* kube writes: {_counts(cold.kube_writes)};",
        f"* Events created, by the regarded object's kind and reason: {_counts(cold.events)}.",
        "",
    ]


def _memory_section(run: Run) -> list[str]:
    held = run.memory
    steady = {**held.tree_mb, **held.simulators_mb}
    columns = {
        "RSS synced": steady,
        "RSS peak": held.peaks.rss_mb,
        "PSS synced": held.tree_pss_mb,
        "PSS peak": held.peaks.pss_mb,
    }
    return [
        "## Memory",
        "",
        "Each process once the restarted tree had synced, and the peak sampled every second "
        "over the whole run (MB); PSS (smaps_rollup) for the tree's processes only. The "
        "tree's totals are sums per sample, so a total's peak is at most the sum of the "
        "processes' peaks:",
        "",
        *_cpu_table(columns, ""),
        f"| **tree total** | **{held.tree_total:.0f}** | **{held.peaks.tree_mb:.0f}** | "
        f"**{held.tree_pss_total:.0f}** | **{held.peaks.tree_pss_mb:.0f}** |",
        "",
        f"While converging from nothing (phase 1) the tree peaked at "
        f"{run.converged.peak_pss_mb:.0f} MB PSS ({run.converged.peak_rss_mb:.0f} MB RSS).",
        "",
    ]


def _churn_section(run: Run, *, settings: Settings) -> list[str]:
    churn = run.churn
    spread = Counter(churn.member_updates.values())
    return [
        "## Node churn",
        "",
        f"{churn.joined} servers added and {churn.joined} Nodes registered (uninitialized, "
        f"as kubelets register them), and {churn.left} Nodes deleted with their servers, "
        f"in about a second; {churn.seconds:.1f} s until every new node was initialized, "
        "every pool held every eligible node and no other, and routes matched the nodes "
        f"({churn.milestones()}).",
        "",
        "* member-update calls per pool (calls: pools): "
        + (", ".join(f"{k}: {v}" for k, v in sorted(spread.items())) or "none")
        + f"; pools never touched: {churn.pools - len(churn.member_updates)};",
        f"* routes: {churn.add_extraroutes} `add_extraroutes`, {churn.remove_extraroutes} "
        "`remove_extraroutes` calls;",
        f"* cloud calls: {_counts(churn.calls)};",
        *(f"* check *{k}*: {v}" for k, v in churn.checks.items()),
        "",
    ]


def _kubelet_section(run: Run, *, settings: Settings) -> list[str]:
    k = run.kubelets
    adds = ", ".join(f"{q} {v:.0f}" for q, v in sorted(k.queue_adds.items()) if v) or "none"
    return [
        "## Kubelet churn",
        "",
        f"{k.heartbeats.sent:,} node status PATCHes in {k.heartbeats.seconds:.0f} s "
        f"({k.heartbeats.rate:.0f}/s, {k.heartbeats.failed} failed or dropped), each bumping "
        "the four conditions' lastHeartbeatTime as a kubelet's status update does, sent "
        "over HTTP to the kube simulator (no admin shortcut). % of a core per process, in a "
        "quiet window just before and while the kubelets posted:",
        "",
        *_cpu_table({"quiet": k.idle_cpu, "kubelet churn": k.cpu}, " %"),
        "",
        f"Node deltas the manager published meanwhile, by channel: {_floats(k.published)}. "
        f"Deltas each worker received: {_floats(k.received or {})}. Keys added to "
        f"the workqueues meanwhile: {adds}.",
        "",
    ]


def _lifecycle_section(run: Run, *, settings: Settings) -> list[str]:
    cycle = run.lifecycle
    return [
        "## Lifecycle",
        "",
        f"Every node's Ready condition set to Unknown (as kube-controller-manager does when "
        f"kubelets stop posting), then {cycle.periods:g} monitor periods of "
        f"{settings.monitor_period:g} s watched: Nova calls {_counts(cycle.nova_calls)} "
        f"({cycle.calls_per_period:.1f} per period); the lifecycle worker used "
        f"{cycle.cpu_percent:.1f} % of a core.",
        "",
        "Upstream's `MonitorNodes` pass (k8s.io/cloud-provider nodelifecycle), run in this "
        "process with this repository's OpenStack provider while the tree's node and "
        f"lifecycle workers were stopped: {_counts(cycle.baseline_calls)} in "
        f"{cycle.baseline_seconds:.1f} s for {cycle.baseline_nodes:,} NotReady nodes.",
        "",
    ]


def _sigterm_section(stops: Sequence[Stop]) -> list[str]:
    return [
        "## SIGTERM while converging",
        "",
        "A fresh world and tree; once a node had been initialized, each worker in turn got "
        "SIGTERM and was timed until it had exited (supervisord restarted it; a restarted "
        f"worker is signalled again once it has been up {SETTLED:g} s):",
        "",
        "| worker | exit (s) | progress when signalled |",
        "| --- | ---: | --- |",
        *(f"| {s.program} | {s.seconds:.2f} | {s.at.strip()} |" for s in stops),
        "",
    ]


def plot(runs: Sequence[Run], *, settings: Settings, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = sorted(runs, key=lambda r: r.converged.seconds)[len(runs) // 2]
    figure, ((top_left, top_right), (bottom_left, bottom_right)) = plt.subplots(
        2, 2, figsize=(13, 9)
    )
    timeline = run.converged.timeline
    seconds = [p.seconds for p in timeline]
    shares: dict[str, Callable[[Progress], float]] = {
        "nodes initialized": lambda p: p.initialized / max(p.nodes, 1),
        "LB Services with ingress": lambda p: p.with_ingress / max(p.lbs, 1),
        "members in pools": lambda p: p.members / max(p.members_wanted, 1),
        "pod CIDRs routed": lambda p: p.routes / max(p.routes_wanted, 1),
        "NetworkUnavailable=False": lambda p: p.network_ready / max(p.nodes, 1),
    }
    for label, share in shares.items():
        top_left.plot(seconds, [100 * share(p) for p in timeline], label=label)
    top_left.axvline(60, color="tab:red", linestyle="--", label="60 s")
    top_left.set(title="Converge from nothing", xlabel="seconds since tree start", ylabel="%")
    top_left.legend(fontsize=8)

    roles = sorted(run.memory.tree_mb)
    top_right.bar(roles, [run.memory.tree_mb[r] for r in roles], label="synced")
    top_right.bar(
        roles,
        [run.memory.peaks.rss_mb.get(r, 0.0) - run.memory.tree_mb[r] for r in roles],
        bottom=[run.memory.tree_mb[r] for r in roles],
        alpha=0.4,
        label="peak (above synced)",
    )
    top_right.set(
        title=f"RSS per process; tree total {run.memory.tree_total:.0f} MB",
        ylabel="MB",
    )
    top_right.tick_params(axis="x", labelrotation=30, labelsize=8)
    top_right.legend(fontsize=8)

    k = run.kubelets
    roles = sorted(set(k.cpu) | set(k.idle_cpu))
    xs = range(len(roles))
    bottom_left.bar(
        [x - 0.2 for x in xs], [k.idle_cpu.get(r, 0.0) for r in roles], 0.4, label="quiet"
    )
    bottom_left.bar([x + 0.2 for x in xs], [k.cpu.get(r, 0.0) for r in roles], 0.4, label="churn")
    bottom_left.axhline(25, color="tab:red", linestyle="--", label="manager target 25 %")
    bottom_left.set_xticks(list(xs), roles, rotation=30, fontsize=8)
    bottom_left.set(
        title=f"Kubelet churn: {k.heartbeats.rate:.0f} heartbeats/s", ylabel="% of a core"
    )
    bottom_left.legend(fontsize=8)

    cycle = run.lifecycle
    bars = {
        "pyccm, per period": cycle.calls_per_period,
        "upstream, one pass": float(cycle.baseline_total),
        "churn: max member\nupdates per pool": float(run.churn.max_updates),
    }
    bottom_right.bar(list(bars), [max(v, 0.5) for v in bars.values()], color="tab:purple")
    bottom_right.axhline(10, color="tab:red", linestyle="--", label="Nova target 10")
    bottom_right.set(title=f"Cloud calls ({settings.nodes:,} nodes NotReady; churn)", yscale="log")
    bottom_right.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


# --- main ----------------------------------------------------------------------------------------


def add_world_flags(parser: argparse.ArgumentParser) -> None:
    """The simulated cloud's and the tree's settings (bench.scaling takes them too)."""
    parser.add_argument("--heartbeat-period", type=float, default=10.0)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--provisioning-delay", type=float, default=1.0)
    # Initializing a node costs 3 kube writes and routing it 1 more: at upstream's 20 QPS
    # 5,000 nodes need over 15 minutes whatever the controllers do.
    parser.add_argument("--kube-api-qps", type=int, default=1000)
    parser.add_argument("--cloud-api-qps", type=int, default=1000)
    parser.add_argument("--concurrent-node-syncs", type=int, default=20)
    parser.add_argument("--concurrent-service-syncs", type=int, default=20)
    parser.add_argument("--node-monitor-period", type=float, default=5.0)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--services", type=int, default=10_000, help="all Services")
    parser.add_argument("--lb-services", type=int, default=200, help="of which LoadBalancer")
    parser.add_argument("--churn", type=int, default=100, help="nodes joining (and leaving)")
    parser.add_argument("--kubelet-seconds", type=float, default=120.0)
    add_world_flags(parser)
    parser.add_argument(
        "--node-sync-toggles",
        type=int,
        default=2,
        help="times one node's exclude-from-external-load-balancers label is toggled",
    )
    parser.add_argument(
        "--max-request-body-size",
        type=int,
        default=None,
        help="the simulated cloud's request body limit (default: the services' own; 0 = none)",
    )
    parser.add_argument("--runs", type=int, default=1, help="runs of the main phases")
    parser.add_argument("--sigterm-rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=1800.0, help="per phase")
    parser.add_argument("--quick", action="store_true", help="a small size (a few minutes)")
    parser.add_argument(
        "--out", default="", help="output path without suffix (default bench/results/large_cluster)"
    )
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.services, args.lb_services, args.churn = 500, 1000, 20, 20
        args.kubelet_seconds, args.sigterm_rounds, args.timeout = 20.0, 2, 300.0
        args.out = args.out or str(Path(tempfile.mkdtemp(prefix="large-cluster-")) / "large")
    args.out = args.out or str(RESULTS / "large_cluster")
    return args


def settings_of(args: argparse.Namespace) -> Settings:
    return Settings(
        nodes=args.nodes,
        services=args.services,
        lb_services=args.lb_services,
        churn=args.churn,
        kubelet_seconds=args.kubelet_seconds,
        heartbeat_period=args.heartbeat_period,
        latency_ms=args.latency_ms,
        provisioning_delay=args.provisioning_delay,
        kube_qps=args.kube_api_qps,
        cloud_qps=args.cloud_api_qps,
        node_syncs=args.concurrent_node_syncs,
        service_syncs=args.concurrent_service_syncs,
        monitor_period=args.node_monitor_period,
        node_sync_toggles=args.node_sync_toggles,
        max_body=args.max_request_body_size,
        # Listing 5,000 nodes and reading the router costs the simulators a little CPU.
        poll=max(0.5, args.nodes / 2500),
        timeout=args.timeout,
        sigterm_rounds=args.sigterm_rounds,
    )


def main() -> int:
    args = parse_args()
    settings = settings_of(args)
    # SIGTERM and SIGHUP unwind like Ctrl-C (whatever this process inherited), so the trees
    # and simulators are stopped, not orphaned; a SIGKILL sends each of them SIGTERM.
    lifetime.stop_on_signals()
    # The tree inherits this environment. A process that crashes in C code (SIGSEGV)
    # leaves its Python stack in tree.log; and as an installed package has its bytecode
    # compiled, no process compiles every module from source at each start (2-3 CPU-s
    # each, on the cold start's clock), as bench.service_scale does.
    os.environ["PYTHONFAULTHANDLER"] = "1"
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    # Two glibc heaps per process, as the image (Containerfile) sets.
    os.environ.setdefault("MALLOC_ARENA_MAX", "2")
    runs = []
    for index in range(args.runs):
        print(f"run {index + 1}/{args.runs}", flush=True)
        runs.append(one_run(settings))
    print("SIGTERM drill", flush=True)
    drill = sigterm_drill(settings) if settings.sigterm_rounds else Drill(stops=[], exits=[])
    table = render(runs, drill, settings=settings, quick=args.quick)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(table)
    plot(runs, settings=settings, path=out.with_suffix(".png"))
    print(table)
    print(f"written: {out.with_suffix('.md')} and .png")
    failed = [k for r in runs for k, v in r.churn.checks.items() if v != "ok"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
