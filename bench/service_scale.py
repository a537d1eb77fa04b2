"""Service sync at scale: `python -m bench.service_scale`.

N LoadBalancer Services seeded in the kube simulator, an OpenStack simulator whose every
call takes `--latency-ms` and whose Octavia objects stay PENDING_* for
`--provisioning-delay` seconds, and the real process tree under supervisord. For each
configuration (service worker processes x `--concurrent-service-syncs`) and run:

* convergence: seconds from the tree's start until every Service has a status ingress
  (the kube API is polled), after which the cloud must hold exactly N load balancers and
  N floating IPs;
* per service worker process, the peak thread count and RSS, sampled from /proc while it
  converges;
* where the time went: CPU seconds of every process of the run, the sync threads' time in
  cloud calls and in the rest of a sync (waiting for the manager's write acks), cloud
  calls and kube writes per Service (both simulators' request logs).

One more run (`--calls-concurrency`) then lets two no-op resync rounds fire
(`--lb-resync-period` chosen to come after convergence; their calls must all be reads: the
first round reads every load balancer's children, the later ones only what changed since
it) and deletes every Service, counting the cloud calls of each phase. One run at the
default `--cloud-api-qps 20` shows where the client-side token bucket caps throughput.

The same-run baseline (`--baseline-services`): upstream's algorithm on a cloud simulator
with the same latency and provisioning delay, in this process: the same Octavia provider,
driven as upstream's service controller drives its own, one Service at a time, each
EnsureLoadBalancer blocking until the load balancer is ACTIVE (polls after 1 s, then x1.2).
Its seconds per Service, times N, against pyccm's measured convergence is the speed-up.

Writes bench/results/service_scale.md and .png; each row is the median of its runs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import msgspec

from pyccm import lifetime
from pyccm.kubeapi.client import KubeClient, KubeSettings
from pyccm.protocol.views import (
    Node,
    NodeAddress,
    NodeStatus,
    OwnerMeta,
    Service,
    ServicePort,
    ServiceSpec,
)
from pyccm.provider.errors import RetryAfter
from pyccm.provider.interface import LoadBalancers
from pyccm_sim.demo import ServiceList, World, child, process_tree, simulators
from pyccm_sim.scenario import seed_node

RESULTS = Path(__file__).parent / "results"
CPUS = os.cpu_count() or 1
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# Listing 1,000 Services costs the kube simulator a little CPU; every half second bounds
# the error of a ~50 s measurement to 1 %.
POLL = 0.5
# Cloud paths only the node, lifecycle and route workers use here: counted apart from the
# Services' own calls (Octavia, Neutron floating IPs). Ports would be the Services' too
# with `manage-security-groups`, which the simulator's cloud.conf leaves off.
OTHER_WORKERS_PATHS = ("/compute/", "/network/v2.0/routers", "/network/v2.0/ports")
OTHER_WORKERS_REQUESTS = ("server_", "flavor_", "router_", "port_")
UUID_LIKE = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}")
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
KUBE_WRITE_VERBS = frozenset({"create", "update", "patch", "delete"})


@dataclass(frozen=True)
class Config:
    """One process layout: `shards` service workers with `syncs` sync threads each."""

    shards: int
    syncs: int
    # Per worker process (each has its own bucket).
    cloud_qps: int

    @property
    def concurrency(self) -> int:
        return self.shards * self.syncs

    @property
    def label(self) -> str:
        return f"{self.shards} x {self.syncs}"


@dataclass(frozen=True)
class Settings:
    services: int
    nodes: int
    latency_ms: float
    provisioning_delay: float
    kube_qps: int
    timeout: float


@dataclass
class Peaks:
    """The largest thread count and RSS seen per service worker process."""

    threads: dict[str, int] = field(default_factory=dict)
    rss_mb: dict[str, float] = field(default_factory=dict)

    def sample(self, processes: dict[str, int]) -> None:
        for role, pid in processes.items():
            status = _proc_status(pid) if role.startswith("service") else None
            if status is None:
                continue
            threads, rss = status
            self.threads[role] = max(self.threads.get(role, 0), threads)
            self.rss_mb[role] = max(self.rss_mb.get(role, 0.0), rss)


@dataclass(frozen=True)
class Calls:
    """Cloud calls of one window: counts by kind, and the simulator-side latencies."""

    kinds: Counter[str]
    latencies_ms: tuple[float, ...]
    # The Services' calls by method and path template, e.g. `GET lbaas/loadbalancers?name`,
    # and the median simulator-side latency of each.
    operations: Counter[str]
    operation_ms: dict[str, float]

    def per_service(self, services: int, *kinds: str) -> float:
        return sum(self.kinds[k] for k in kinds or ("read", "write")) / services


@dataclass(frozen=True)
class Breakdown:
    """From the tree's Prometheus files: what the service sync threads spent time on."""

    sync_seconds: float
    cloud_seconds: float
    syncs: Counter[str]
    conflicts: float


@dataclass(frozen=True)
class Run:
    config: Config
    seconds: float
    first_seconds: float
    lbs: int
    fips: int
    peaks: Peaks
    # CPU seconds of every process of the run while it converged, by role.
    cpu: dict[str, float]
    # CPU seconds of the whole machine in that time: busy (anyone's) and available.
    machine_busy: float
    machine_total: float
    calls: Calls
    kube_writes: Counter[str]
    breakdown: Breakdown


@dataclass(frozen=True)
class Phases:
    """Cloud calls of two no-op resync rounds and of deleting every Service."""

    resync: Calls
    resync_seconds: float
    # pyccm's CPU (manager + service workers) from the round's first resync to its last.
    resync_cpu: float
    # The round after: the load balancers verified by the first are not read again.
    later_resync: Calls
    later_resync_seconds: float
    later_resync_cpu: float
    delete: Calls
    delete_seconds: float
    delete_kube: Counter[str]


# --- the processes of one run ------------------------------------------------------------


def processes_of(workdir: Path) -> dict[str, int]:
    """Pids of the processes whose command line names `workdir`, by role."""
    marker = str(workdir)
    found: dict[str, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if any(marker in arg for arg in argv):
            found[_role(argv)] = int(entry.name)
    return found


def _role(argv: list[str]) -> str:
    """`kube-sim`, `manager`, `cloud-node`, `service-0`, ... from a `pyccm` command line."""
    words = [a for a in argv if a and not a.startswith("-")]
    # python, .../pyccm, then the sub-command words (or python -m pyccm ...).
    tail = words[words.index("pyccm") + 1 :] if "pyccm" in words else words[2:]
    if tail[:1] == ["sim"]:
        return f"{tail[1]}-sim"
    if tail[:2] == ["worker", "service"]:
        shard = next((a.split("=", 1)[1] for a in argv if a.startswith("--shard=")), "0/1")
        return f"service-{shard.split('/')[0]}"
    if tail[:1] == ["worker"] and len(tail) > 1:
        return tail[1]
    return tail[0] if tail else "?"


def _proc_status(pid: int) -> tuple[int, float] | None:
    """(threads, VmRSS in MiB) from /proc/<pid>/status; None when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    threads = int(fields.get("Threads", "0").strip())
    rss_kb = int(fields.get("VmRSS", "0 kB").split()[0])
    return threads, rss_kb / 1024


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat."""
    ticks = [int(t) for t in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    # user nice system idle iowait irq softirq steal ...: idle and iowait are not busy.
    idle = ticks[3] + ticks[4]
    total = sum(ticks[:8])
    return (total - idle) / CLOCK_TICKS, total / CLOCK_TICKS


def cpu_seconds(processes: dict[str, int]) -> dict[str, float]:
    used: dict[str, float] = {}
    for role, pid in processes.items():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces; the fields after its ")" are fixed: utime and
        # stime are the 14th and 15th of the line.
        fields = stat.rsplit(")", 1)[1].split()
        used[role] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return used


# --- what the simulators and the tree recorded -------------------------------------------


class Cloud:
    """The OpenStack simulator's `/_sim` API."""

    def __init__(self, url: str) -> None:
        self._url = url.rstrip("/")

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self._url}/_sim/{path}", timeout=30) as answer:
            return json.load(answer)

    def mark(self) -> int:
        return int(self._get("calls?since=1000000000")["next"])

    def calls(self, since: int) -> Calls:
        calls = self._get(f"calls?since={since}")["calls"]
        mine = [c for c in calls if _kind_of_call(c) in ("read", "write")]
        latencies: dict[str, list[float]] = {}
        for call in mine:
            latencies.setdefault(_operation(call), []).append(float(call["latency_ms"]))
        return Calls(
            kinds=Counter(_kind_of_call(call) for call in calls),
            latencies_ms=tuple(float(c["latency_ms"]) for c in mine),
            operations=Counter({op: len(values) for op, values in latencies.items()}),
            operation_ms={op: statistics.median(values) for op, values in latencies.items()},
        )

    def inventory(self) -> dict[str, int]:
        inventory: dict[str, int] = self._get("counters")["inventory"]
        return inventory


def _kind_of_call(call: dict[str, Any]) -> str:
    if call["service"] == "identity":
        return "identity"
    if any(prefix in str(call["path"]) for prefix in OTHER_WORKERS_PATHS):
        return "other workers"
    return "write" if call["method"] in WRITE_METHODS else "read"


def _operation(call: dict[str, Any]) -> str:
    """`GET lbaas/loadbalancers/{id}`, `GET floatingips?port_id`: ids and values dropped."""
    path, _, query = str(call["path"]).partition("?")
    words = [w for w in path.split("/") if w][2:]  # drop the service prefix and version
    words = ["{id}" if UUID_LIKE.fullmatch(w) else w for w in words]
    # A Neutron tag in the path (`routers/{id}/tags/<tag>`) is a value too.
    words = ["{tag}" if i and words[i - 1] == "tags" else w for i, w in enumerate(words)]
    keys = sorted({pair.split("=")[0] for pair in query.split("&") if pair})
    return f"{call['method']} {'/'.join(words)}{'?' + ','.join(keys) if keys else ''}"


class Kube:
    """The kube simulator through the admin kubeconfig: Services and the request log."""

    def __init__(self, world: World) -> None:
        settings = KubeSettings(kubeconfig=str(world.kubeconfig), qps=1000, burst=1000)
        self.client = KubeClient(settings=settings)

    def services(self) -> ServiceList:
        return msgspec.json.decode(self.client.request("GET", "/api/v1/services"), type=ServiceList)

    def with_ingress(self) -> int:
        return sum(1 for s in self.services().items if s.status.load_balancer.ingress)

    def log_length(self) -> int:
        return len(self._log())

    def writes(self, since: int) -> Counter[str]:
        return Counter(
            _kind_of_write(r) for r in self._log()[since:] if r.get("verb") in KUBE_WRITE_VERBS
        )

    def _log(self) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = json.loads(self.client.request("GET", "/_sim/requests"))
        return records


def _kind_of_write(record: dict[str, Any]) -> str:
    sub = record.get("subresource") or ""
    conflict = " (409)" if record.get("code") == 409 else ""
    return f"{record['verb']} {record.get('resource', '?')}{'/' + sub if sub else ''}{conflict}"


def tree_metrics(world: World) -> list[tuple[str, dict[str, str], float]]:
    """Every sample the tree's processes wrote to PROMETHEUS_MULTIPROC_DIR, summed, as the
    manager's /metrics reads them."""
    from pyccm.exposition import pod_registry

    registry = pod_registry(str(world.workdir / "run" / "metrics"))
    return [(s.name, s.labels, s.value) for m in registry.collect() for s in m.samples]


def resyncs_total(world: World) -> float:
    return sum(v for name, _, v in tree_metrics(world) if name == "pyccm_service_lb_resyncs_total")


def breakdown(world: World) -> Breakdown:
    samples = tree_metrics(world)

    def service_sync(labels: dict[str, str]) -> bool:
        return labels.get("controller", "").startswith("service")

    def lb_request(labels: dict[str, str]) -> bool:
        return not labels.get("request", "").startswith(OTHER_WORKERS_REQUESTS)

    return Breakdown(
        sync_seconds=sum(
            v
            for n, labels, v in samples
            if n == "pyccm_sync_duration_seconds_sum" and service_sync(labels)
        ),
        cloud_seconds=sum(
            v
            for n, labels, v in samples
            if n == "openstack_api_request_duration_seconds_sum" and lb_request(labels)
        ),
        syncs=_sum_by(samples, "pyccm_sync_total", "outcome", service_sync),
        conflicts=sum(v for n, _, v in samples if n == "pyccm_writer_conflict_retries_total"),
    )


def _sum_by(
    samples: list[tuple[str, dict[str, str], float]],
    name: str,
    label: str,
    keep: Callable[[dict[str, str]], bool],
) -> Counter[str]:
    """One metric summed by one label (over shards and processes)."""
    total: Counter[str] = Counter()
    for sample, labels, value in samples:
        if sample == name and keep(labels):
            total[labels[label]] += int(value)
    return total


# --- one run ---------------------------------------------------------------------------------


@contextmanager
def converged_tree(
    config: Config, *, settings: Settings, resync_period: str
) -> Iterator[tuple[Run, World, Kube, Cloud]]:
    """Fresh simulators and tree; yields once every Service has ingress (or on timeout).
    The run's directory is removed afterwards unless it timed out (its logs stay)."""
    workdir = Path(tempfile.mkdtemp(prefix="pyccm-bench-"))
    cloud_args = ("--provisioning-delay", str(settings.provisioning_delay))
    with ExitStack() as stack:
        world = stack.enter_context(
            simulators(
                workdir,
                nodes=settings.nodes,
                services=settings.services,
                latency=settings.latency_ms,
                cloud_args=cloud_args,
            )
        )
        kube, cloud = Kube(world), Cloud(world.cloud_url)
        stack.callback(kube.client.close)
        cpu_before = cpu_seconds(processes_of(workdir))
        machine_before = machine_cpu()
        driver_before = time.process_time()
        kube_mark = kube.log_length()
        started = time.perf_counter()
        stack.enter_context(
            process_tree(
                world,
                service_shards=config.shards,
                service_syncs=config.syncs,
                cloud_api_qps=config.cloud_qps,
                kube_api_qps=settings.kube_qps,
                worker_args=f"--lb-resync-period={resync_period}",
            )
        )
        seconds, first, peaks = _wait_for_ingress(world, kube, settings=settings, started=started)
        cpu = cpu_seconds(processes_of(workdir))
        machine = [
            after - before for after, before in zip(machine_cpu(), machine_before, strict=True)
        ]
        inventory = cloud.inventory()
        run = Run(
            config=config,
            seconds=seconds,
            first_seconds=first,
            lbs=inventory.get("loadbalancer", 0),
            fips=inventory.get("floatingip", 0),
            peaks=peaks,
            cpu={
                **{role: cpu[role] - cpu_before.get(role, 0.0) for role in cpu},
                # This process: polling the kube API and /proc.
                "bench driver": time.process_time() - driver_before,
            },
            machine_busy=machine[0],
            machine_total=machine[1],
            calls=cloud.calls(0),
            kube_writes=kube.writes(kube_mark),
            breakdown=breakdown(world),
        )
        yield run, world, kube, cloud
    if seconds != float("inf"):
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"  logs kept in {workdir}", file=sys.stderr)


def _wait_for_ingress(
    world: World, kube: Kube, *, settings: Settings, started: float
) -> tuple[float, float, Peaks]:
    """(seconds until all Services have ingress, until the first one did, peaks)."""
    peaks = Peaks()
    done = 0
    first = float("inf")
    while time.perf_counter() - started < settings.timeout:
        peaks.sample(processes_of(world.workdir))
        done = kube.with_ingress()
        if done and first == float("inf"):
            first = time.perf_counter() - started
        if done == settings.services:
            return time.perf_counter() - started, first, peaks
        time.sleep(POLL)
    print(f"  timed out with {done}/{settings.services} Services converged", file=sys.stderr)
    return float("inf"), first, peaks


def timed_run(config: Config, *, settings: Settings) -> Run:
    # A resync round inside a measurement would add reads for the Services already done.
    with converged_tree(config, settings=settings, resync_period="1h") as (run, *_):
        return run


def phases_run(config: Config, *, settings: Settings, resync_period: float) -> tuple[Run, Phases]:
    """A converged run, then one no-op resync round, then every Service deleted."""
    with converged_tree(config, settings=settings, resync_period=f"{resync_period:g}s") as (
        run,
        world,
        kube,
        cloud,
    ):
        before = resyncs_total(world)
        if before:
            print(f"  warning: {before:.0f} resyncs before convergence", file=sys.stderr)
        mark = cloud.mark()
        resync_seconds, resync_cpu = _wait_for_resyncs(world, before + settings.services, settings)
        resync = cloud.calls(mark)
        mark = cloud.mark()
        later_seconds, later_cpu = _wait_for_resyncs(
            world, before + 2 * settings.services, settings
        )
        later_resync = cloud.calls(mark)
        mark, kube_mark = cloud.mark(), kube.log_length()
        delete_seconds = _delete_all(kube, cloud, settings=settings)
        phases = Phases(
            resync=resync,
            resync_seconds=resync_seconds,
            resync_cpu=resync_cpu,
            later_resync=later_resync,
            later_resync_seconds=later_seconds,
            later_resync_cpu=later_cpu,
            delete=cloud.calls(mark),
            delete_seconds=delete_seconds,
            delete_kube=kube.writes(kube_mark),
        )
        return run, phases


def _wait_for_resyncs(world: World, target: float, settings: Settings) -> tuple[float, float]:
    """Until the resync counter reaches `target`. Returns how long the round itself took
    and pyccm's CPU seconds (manager and service workers) from its first resync to its
    last, sampled every 0.2 s (the idle wait for the round is not counted)."""
    deadline = time.monotonic() + settings.timeout
    start = resyncs_total(world)
    first: tuple[float, float] | None = None
    while time.monotonic() < deadline:
        count = resyncs_total(world)
        now = time.monotonic()
        if first is None and count > start:
            first = (now, _pyccm_cpu(world))
        if count >= target:
            began, cpu = first or (now, _pyccm_cpu(world))
            return now - began, _pyccm_cpu(world) - cpu
        time.sleep(0.2)
    raise SystemExit(f"no full resync round within {settings.timeout:.0f}s ({world.workdir})")


def _pyccm_cpu(world: World) -> float:
    used = cpu_seconds(processes_of(world.workdir))
    return sum(v for role, v in used.items() if role == "manager" or role.startswith("service"))


def _delete_all(kube: Kube, cloud: Cloud, *, settings: Settings) -> float:
    """DELETE every Service; seconds until they, their LBs and FIPs are all gone."""
    started = time.perf_counter()
    for service in kube.services().items:
        path = f"/api/v1/namespaces/{service.namespace}/services/{service.name}"
        kube.client.request("DELETE", path)
    while time.perf_counter() - started < settings.timeout:
        inventory = cloud.inventory()
        empty = not inventory.get("loadbalancer") and not inventory.get("floatingip")
        if empty and not kube.services().items:
            return time.perf_counter() - started
        time.sleep(POLL)
    return float("inf")


# --- the same-run baseline: upstream's algorithm ---------------------------------------------

# Upstream's wait for ACTIVE after a write (docs/upstream.md#waiting): 1 s, then x1.2, 23 polls.
UPSTREAM_FIRST_WAIT = 1.0
UPSTREAM_WAIT_FACTOR = 1.2
UPSTREAM_POLLS = 23


@dataclass(frozen=True)
class Baseline:
    services: int
    seconds: float
    calls: Calls

    @property
    def per_service(self) -> float:
        return self.seconds / self.services


def upstream_baseline(settings: Settings, *, services: int) -> Baseline:
    """`services` Services ensured one at a time, each blocking until its load balancer is
    ACTIVE, on a fresh cloud simulator with the run's latency and provisioning delay."""
    workdir = Path(tempfile.mkdtemp(prefix="pyccm-baseline-"))
    command = [
        *("sim", "openstack", "--seed-nodes", str(settings.nodes)),
        *("--write-config", str(workdir / "cloud"), "--latency-ms", str(settings.latency_ms)),
        *("--provisioning-delay", str(settings.provisioning_delay)),
    ]
    with child(command, workdir / "openstack.log") as url:
        lbs, close = _octavia(workdir / "cloud" / "cloud.conf")
        nodes = _baseline_nodes(settings.nodes)
        cloud = Cloud(url)
        try:
            # Token, version document and external network: process-wide, found once.
            _ensure_blocking(lbs, _baseline_service(services), nodes)
            mark = cloud.mark()
            started = time.perf_counter()
            for index in range(services):
                _ensure_blocking(lbs, _baseline_service(index), nodes)
            seconds = time.perf_counter() - started
            calls = cloud.calls(mark)
        finally:
            close()
    shutil.rmtree(workdir, ignore_errors=True)
    return Baseline(services=services, seconds=seconds, calls=calls)


def _octavia(cloud_conf: Path) -> tuple[LoadBalancers, Callable[[], None]]:
    from prometheus_client import CollectorRegistry

    from pyccm.provider.openstack import create_cloud
    from pyccm.provider.settings import ProviderSettings

    provider_settings = ProviderSettings(
        cloud_config=cloud_conf, cluster_name="demo", cloud_api_qps=1e6, cloud_api_burst=10**6
    )
    cloud = create_cloud(settings=provider_settings, registry=CollectorRegistry(), environ={})
    lbs = cloud.load_balancers()
    assert lbs is not None
    return lbs, cloud.close


def _ensure_blocking(lbs: LoadBalancers, service: Service, nodes: tuple[Node, ...]) -> None:
    """EnsureLoadBalancer as upstream's controller runs it: the call returns only once the
    load balancer is ACTIVE and done, polling with upstream's backoff meanwhile."""
    wait = UPSTREAM_FIRST_WAIT
    for _ in range(UPSTREAM_POLLS):
        try:
            lbs.ensure(service=service, nodes=nodes)
            return
        except RetryAfter:
            time.sleep(wait)
            wait *= UPSTREAM_WAIT_FACTOR
    raise SystemExit(f"baseline: {service.key} did not converge in {UPSTREAM_POLLS} polls")


def _baseline_nodes(count: int) -> tuple[Node, ...]:
    return tuple(
        Node(
            metadata=OwnerMeta(name=seed.name, uid=f"uid-{seed.name}"),
            status=NodeStatus(
                addresses=(NodeAddress(type="InternalIP", address=seed.internal_ip),)
            ),
        )
        for seed in (seed_node(i) for i in range(count))
    )


def _baseline_service(index: int) -> Service:
    """Shaped like the kube simulator's seeded Services: one port, a second on every third."""
    ports = [ServicePort(name="http", port=80, node_port=30000 + 2 * index, protocol="TCP")]
    if index % 3 == 0:
        ports.append(
            ServicePort(name="https", port=443, node_port=30001 + 2 * index, protocol="TCP")
        )
    name = f"svc-{index:05d}"
    return Service(
        metadata=OwnerMeta(name=name, namespace="baseline", uid=f"uid-baseline-{name}"),
        spec=ServiceSpec(type="LoadBalancer", ports=tuple(ports)),
    )


# --- the report ---------------------------------------------------------------------------


def median_run(samples: list[Run]) -> Run:
    return sorted(samples, key=lambda r: r.seconds)[len(samples) // 2]


def render(
    runs: dict[Config, list[Run]],
    *,
    settings: Settings,
    phases: tuple[Run, Phases] | None,
    baseline: Config,
    upstream: Baseline | None = None,
) -> str:
    n = settings.services
    base = statistics.median(r.seconds for r in runs[baseline]) if baseline in runs else None
    lines = [
        f"# Service sync at scale: {n:,} LoadBalancer Services, {settings.nodes} nodes",
        "",
        f"OpenStack simulator: {settings.latency_ms:g} ms per call, Octavia provisioning delay "
        f"{settings.provisioning_delay:g} s. Manager `--kube-api-qps {settings.kube_qps}` "
        f"(burst {int(settings.kube_qps * 1.5)}); `--cloud-api-qps` (and equal burst) per "
        "service worker as in the table. Timing runs use `--lb-resync-period=1h` so that no "
        "resync round falls inside a measurement. Time runs from the start of the tree "
        "(processes spawned, nothing cached but Python's bytecode, as in an installed "
        "package) until every Service has a status ingress, "
        f"polled every {POLL} s. Machine: {CPUS} CPUs, shared with other work while this ran.",
        "",
        "| service workers x syncs | --cloud-api-qps | runs (s) | **median (s)** | first ready (s)"
        " | Services/s | bucket cap (Services/s) | speed-up vs 1 x 1 | linear up to the cap | "
        "**% of that** | LBs / FIPs | peak threads | peak RSS (MiB) | cloud calls / Service | "
        "kube writes / Service |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- "
        "| ---: | ---: |",
        *(_row(config, samples, n=n, base=base) for config, samples in runs.items()),
        "",
        "*First ready*: when the first Service had its ingress; all N are queued at the "
        "start, and a Service sent back by RetryAfter (LB still PENDING) queues behind the "
        "first syncs of the others, so this is about when the last LB was created. "
        "*Bucket cap*: `--cloud-api-qps` x workers / cloud calls "
        "per Service, the most the client-side token buckets allow. *Linear up to the cap*: "
        "min(concurrency, cap / (Services/s at 1 x 1)), the issue's yardstick (target: "
        "speed-up >= 80 % of it). Peak threads and RSS are per service worker process (one "
        "value per shard).",
        "",
        *_time_section(runs, n=n),
        "",
        *_cpu_section(runs, n=n),
        "",
    ]
    if upstream is not None:
        lines += _upstream_section(runs, upstream, settings=settings)
    if phases is not None:
        lines += _phases_section(*phases, n=n)
    return "\n".join(lines) + "\n"


def _upstream_section(
    runs: dict[Config, list[Run]], upstream: Baseline, *, settings: Settings
) -> list[str]:
    """pyccm's measured convergence against upstream's algorithm, measured in the same run."""
    n = settings.services
    projected = upstream.per_service * n
    lines = [
        "Same-run baseline: upstream's algorithm on a cloud simulator with the same latency "
        "and provisioning delay, in the bench process: the same Octavia provider driven as "
        "upstream's service controller drives its own, one Service at a time, each "
        "EnsureLoadBalancer blocking until ACTIVE (polls after 1 s, then x1.2). Measured on "
        f"{upstream.services} Services and extrapolated to {n:,} (linear: one at a time). "
        "It leaves out what upstream would add (its kube writes, its process start, its poll "
        "right after each write), so the speed-ups are lower bounds:",
        "",
        "| | Services measured | seconds | s / Service | cloud calls / Service | "
        f"{n:,} Services (s) | **pyccm's speed-up** |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| upstream's algorithm | {upstream.services} | {upstream.seconds:.1f} | "
        f"{upstream.per_service:.2f} | {upstream.calls.per_service(upstream.services):.1f} | "
        f"{projected:.0f} (extrapolated) | 1.0 |",
    ]
    for config, samples in sorted(runs.items(), key=lambda item: item[0].concurrency):
        if config.cloud_qps != max(c.cloud_qps for c in runs):
            continue
        median = statistics.median(r.seconds for r in samples)
        calls = statistics.median(r.calls.per_service(n) for r in samples)
        lines.append(
            f"| pyccm, {config.label} | {n:,} | {median:.1f} | {median / n:.3f} | {calls:.1f} | "
            f"{median:.1f} (measured) | **{projected / median:.1f}x** |"
        )
    return [*lines, ""]


def bucket_cap(config: Config, samples: list[Run], *, n: int) -> float:
    """Services/s the client-side token buckets allow: QPS x workers / calls per Service."""
    calls = statistics.median(r.calls.per_service(n) for r in samples)
    return config.cloud_qps * config.shards / calls


def ideal_speedup(config: Config, samples: list[Run], *, n: int, base: float) -> float:
    """Linear in concurrency until the token buckets' cap (the first published run's yardstick)."""
    return min(float(config.concurrency), bucket_cap(config, samples, n=n) * base / n)


def _row(config: Config, samples: list[Run], *, n: int, base: float | None) -> str:
    median = statistics.median(r.seconds for r in samples)
    speedup = base / median if base else float("nan")
    ideal = ideal_speedup(config, samples, n=n, base=base) if base else float("nan")
    workers = sorted(samples[0].peaks.threads)
    threads = ", ".join(str(max(r.peaks.threads.get(w, 0) for r in samples)) for w in workers)
    rss = ", ".join(f"{max(r.peaks.rss_mb.get(w, 0.0) for r in samples):.0f}" for w in workers)
    calls = statistics.median(r.calls.per_service(n) for r in samples)
    writes = statistics.median(sum(r.kube_writes.values()) / n for r in samples)
    counts = ", ".join(sorted({f"{r.lbs} / {r.fips}" for r in samples}))
    runs = ", ".join(f"{r.seconds:.1f}" for r in samples)
    plural = "s" if len(samples) > 1 else ""
    return (
        f"| {config.label} | {config.cloud_qps} | {runs} ({len(samples)} run{plural}) | "
        f"**{median:.1f}** | {statistics.median(r.first_seconds for r in samples):.1f} | "
        f"{n / median:.1f} | {bucket_cap(config, samples, n=n):.1f} | {speedup:.1f} | "
        f"{ideal:.1f} | **{100 * speedup / ideal:.0f} %** | "
        f"{counts} | {threads} | {rss} | {calls:.1f} | {writes:.1f} |"
    )


def _time_section(runs: dict[Config, list[Run]], *, n: int) -> list[str]:
    """Where the sync threads' time went (median run of each row)."""
    lines = [
        "Where the sync threads' time went (median run of each row). Thread-seconds = "
        "concurrency x wall time. *In cloud calls*: client-side duration of the Services' "
        "cloud calls (`openstack_api_request_duration_seconds`, token-bucket waits included). "
        "*Rest of sync*: the other time inside syncs, mostly waiting for the manager to apply "
        "the Service's kube writes and ack them. *Idle*: no Service was ready to sync "
        "(waiting for Octavia's provisioning delay). Simulator-side latency is what the "
        "OpenStack simulator measured per call (injected latency included).",
        "",
        "| workers x syncs | thread-s | in cloud calls | rest of sync | idle (startup included) "
        "| syncs / Service (ok, retry-after, error) | sim latency median / p90 (ms) "
        "| writer 409 retries / Service |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- | ---: |",
    ]
    for config, samples in runs.items():
        run = median_run(samples)
        b = run.breakdown
        total = config.concurrency * run.seconds
        latencies = sorted(run.calls.latencies_ms) or [0.0]
        p90 = latencies[int(0.9 * (len(latencies) - 1))]
        syncs = ", ".join(f"{b.syncs[k] / n:.2f}" for k in ("ok", "retry_after", "error"))
        lines.append(
            f"| {config.label} | {total:.0f} | {b.cloud_seconds:.0f} | "
            f"{b.sync_seconds - b.cloud_seconds:.0f} | {max(0.0, total - b.sync_seconds):.0f} | "
            f"{syncs} | {statistics.median(latencies):.0f} / {p90:.0f} | {b.conflicts / n:.2f} |"
        )
    return lines


def pyccm_cpu_ms(run: Run, *, n: int) -> float:
    """pyccm's CPU per converged Service: the manager's and the service workers' CPU
    seconds while converging (their start-up included), in ms per Service."""
    used = sum(v for role, v in run.cpu.items() if role == "manager" or role.startswith("service"))
    return 1000 * used / n


def _cpu_section(runs: dict[Config, list[Run]], *, n: int) -> list[str]:
    """CPU seconds per process during convergence (median run): is the machine the limit?"""
    roles = sorted({role for samples in runs.values() for r in samples for role in r.cpu})
    lines = [
        "CPU seconds used while converging (median run of each row), by process of the run; "
        f"*capacity* = wall time x {CPUS} CPUs; *machine busy* = CPU seconds anyone on the "
        "machine used meanwhile (from /proc/stat), so *others* = busy - this run's total; "
        "**pyccm ms / Service** = (manager + service workers) / Services, start-up included "
        "(target <= 10 ms):",
        "",
        "| workers x syncs | wall (s) | capacity | machine busy | others | "
        + " | ".join(roles)
        + " | total | **pyccm ms / Service** |",
        "| --- | ---: | ---: | ---: | ---: | "
        + " | ".join("---:" for _ in roles)
        + " | ---: | ---: |",
    ]
    for config, samples in runs.items():
        run = median_run(samples)
        cells = " | ".join(f"{run.cpu.get(role, 0.0):.1f}" for role in roles)
        ours = sum(run.cpu.values())
        lines.append(
            f"| {config.label} | {run.seconds:.1f} | {run.machine_total:.0f} | "
            f"{run.machine_busy:.0f} | {run.machine_busy - ours:.0f} | {cells} | {ours:.1f} | "
            f"**{pyccm_cpu_ms(run, n=n):.1f}** |"
        )
    return lines


def _phases_section(run: Run, phases: Phases, *, n: int) -> list[str]:
    def cells(calls: Calls) -> str:
        kinds = calls.kinds
        return (
            f"{calls.per_service(n):.2f} | {calls.per_service(n, 'read'):.2f} | "
            f"{calls.per_service(n, 'write'):.2f} | {kinds['other workers']} | {kinds['identity']}"
        )

    return [
        f"Cloud calls per Service, one run at {run.config.label} (the node, lifecycle and "
        "route workers' Nova and router calls and Keystone token requests of the same window "
        "are counted apart, as totals):",
        "",
        "| phase | seconds | calls / Service | reads / Service | writes / Service | "
        "other workers' calls | Keystone |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| create: tree start → every Service has ingress | {run.seconds:.1f} | "
        f"{cells(run.calls)} |",
        f"| no-op resync: the first `--lb-resync-period` round | {phases.resync_seconds:.1f} | "
        f"{cells(phases.resync)} |",
        f"| no-op resync: the rounds after it | {phases.later_resync_seconds:.1f} | "
        f"{cells(phases.later_resync)} |",
        "| delete: every Service deleted → no LB, no FIP, no Service | "
        f"{phases.delete_seconds:.1f} | {cells(phases.delete)} |",
        "",
        "pyccm's CPU (manager and service workers) per Service in a no-op resync round, "
        "from the round's first resync to its last: first round "
        f"{phases.resync_cpu / n * 1000:.2f} ms, later rounds "
        f"{phases.later_resync_cpu / n * 1000:.2f} ms.",
        "",
        "The Services' cloud calls by operation, per Service (median simulator-side "
        "latency of each, injected latency included):",
        "",
        f"* create: {_operations_text(run.calls, n)}",
        f"* no-op resync, first round: {_operations_text(phases.resync, n)}",
        f"* no-op resync, later rounds: {_operations_text(phases.later_resync, n)}",
        f"* delete: {_operations_text(phases.delete, n)}",
        "",
        "The first resync round reads every load balancer's listeners, pools and members "
        "(the sync right after a create cannot vouch for them: a load balancer's `updated_at` "
        "counts whole seconds); a load balancer whose `updated_at` has not moved since that "
        "verification is not read again in the later rounds, only itself and its floating IP.",
        "",
        "Kube writes of the whole tree while converging, per Service: "
        f"{_counts_text(run.kube_writes, n)}.",
        "",
        f"While deleting, per Service: {_counts_text(phases.delete_kube, n)}.",
        "",
    ]


def _operations_text(calls: Calls, n: int) -> str:
    return ", ".join(
        f"`{op}` {count / n:.2f} ({calls.operation_ms[op]:.0f} ms)"
        for op, count in calls.operations.most_common()
    )


def _counts_text(counts: Counter[str], n: int) -> str:
    return ", ".join(f"`{kind}` {count / n:.2f}" for kind, count in counts.most_common())


def plot(
    runs: dict[Config, list[Run]], *, settings: Settings, baseline: Config, path: Path
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    medians = {c: statistics.median(r.seconds for r in runs[c]) for c in runs}
    line = sorted(
        (c for c in runs if c.shards == 1 and c.cloud_qps == baseline.cloud_qps),
        key=_by_concurrency,
    )
    extra = [c for c in runs if c not in line]
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for config, samples in runs.items():
        left.scatter(
            [config.concurrency] * len(samples),
            [r.seconds for r in samples],
            color="tab:gray",
            alpha=0.4,
            s=12,
        )
    left.plot(
        [c.concurrency for c in line],
        [medians[c] for c in line],
        "o-",
        color="tab:blue",
        label="1 service worker (median)",
    )
    for config in extra:
        left.plot(
            [config.concurrency],
            [medians[config]],
            _marker(config, baseline),
            markersize=9,
            label=_extra_label(config),
        )
    left.axhline(60, color="tab:red", linestyle="--", label="target: 60 s at 50")
    left.set(
        title=f"Convergence of {settings.services:,} LoadBalancer Services",
        xlabel="concurrent syncs",
        ylabel="seconds",
        xscale="log",
        yscale="log",
    )
    left.legend(fontsize=8)
    base = medians.get(baseline)
    if base:
        xs = sorted({c.concurrency for c in runs})
        right.plot(xs, xs, "--", color="tab:gray", label="linear")
        right.plot(xs, [0.8 * x for x in xs], ":", color="tab:red", label="80 % of linear (target)")
        right.plot(
            [c.concurrency for c in line],
            [base / medians[c] for c in line],
            "o-",
            color="tab:blue",
            label="1 service worker",
        )
        for config in extra:
            right.plot(
                [config.concurrency],
                [base / medians[config]],
                _marker(config, baseline),
                markersize=9,
                label=_extra_label(config),
            )
        for qps in sorted({c.cloud_qps for c in runs}):
            caps = [
                bucket_cap(c, runs[c], n=settings.services) * base / settings.services
                for c in runs
                if c.cloud_qps == qps and c.shards == 1
            ]
            if caps:
                right.axhline(
                    statistics.median(caps),
                    color="tab:orange" if qps != baseline.cloud_qps else "tab:green",
                    linestyle="-.",
                    label=f"token-bucket cap, 1 worker at --cloud-api-qps {qps}",
                )
        right.set(
            title="Speed-up over concurrency 1",
            xlabel="concurrent syncs",
            ylabel="speed-up",
            xscale="log",
            yscale="log",
        )
        right.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def _by_concurrency(config: Config) -> int:
    return config.concurrency


def _marker(config: Config, baseline: Config) -> str:
    return "s" if config.cloud_qps == baseline.cloud_qps else "X"


def _extra_label(config: Config) -> str:
    return f"{config.label}, --cloud-api-qps {config.cloud_qps}"


# --- main ------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--services", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3, help="runs per configuration (default 3)")
    parser.add_argument(
        "--runs-at-1", type=int, default=1, help="runs at concurrency 1 (slow; default 1)"
    )
    parser.add_argument(
        "--concurrency", default="1,10,50", help="syncs of one service worker (default 1,10,50)"
    )
    parser.add_argument(
        "--shards",
        default="2x25",
        help="sharded layouts, workers x syncs, comma-separated ('' for none)",
    )
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--provisioning-delay", type=float, default=1.0)
    # Each Service costs ~6-7 kube writes (finalizer, annotations, status, events): at
    # upstream's 20 QPS, 1,000 Services need over 300 s whatever the controller does.
    parser.add_argument("--kube-api-qps", type=int, default=1000)
    # Each Service costs ~7 cloud calls: the default 20/s caps one worker at ~3 Services/s.
    parser.add_argument("--cloud-api-qps", type=int, default=1000)
    parser.add_argument(
        "--capped-qps",
        type=int,
        default=20,
        help="one run at this --cloud-api-qps and the top concurrency (0: none)",
    )
    parser.add_argument(
        "--calls-concurrency",
        type=int,
        default=50,
        help="syncs of the run that counts resync and delete calls (0: none)",
    )
    parser.add_argument(
        "--resync-period",
        type=float,
        default=0.0,
        help="--lb-resync-period (s) of that run; 0: twice its measured convergence + 20 s",
    )
    parser.add_argument(
        "--baseline-services",
        type=int,
        default=20,
        help="Services of the same-run baseline of upstream's algorithm (0: none)",
    )
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument(
        "--quick", action="store_true", help="a small smoke configuration, written to a temp dir"
    )
    parser.add_argument(
        "--out", default="", help="output path without suffix (default bench/results/service_scale)"
    )
    args = parser.parse_args()
    if args.quick:
        args.services, args.runs, args.concurrency, args.shards = 40, 1, "1,10", "2x5"
        args.capped_qps, args.calls_concurrency, args.timeout = 20, 10, 300.0
        args.baseline_services = 4
        args.out = args.out or str(
            Path(tempfile.mkdtemp(prefix="service-scale-")) / "service_scale"
        )
    args.out = args.out or str(RESULTS / "service_scale")
    return args


def configs(args: argparse.Namespace) -> list[Config]:
    layouts = [(1, int(c)) for c in args.concurrency.split(",") if c]
    for layout in (s for s in args.shards.split(",") if s):
        shards, syncs = layout.split("x")
        layouts.append((int(shards), int(syncs)))
    found = [Config(shards=s, syncs=c, cloud_qps=args.cloud_api_qps) for s, c in layouts]
    if args.capped_qps and found:
        top = max(found, key=lambda c: (c.concurrency, -c.shards))
        found.append(replace(top, cloud_qps=args.capped_qps))
    return found


def _resync_period(measured: list[Run]) -> float:
    """Long enough that the second resync round comes after convergence, no longer."""
    if not measured:
        return 120.0
    return 2 * statistics.median(r.seconds for r in measured) + 20.0


def main() -> int:
    args = parse_args()
    lifetime.stop_on_signals()  # SIGTERM, SIGHUP: the `with` blocks stop the tree and the sims
    # The processes of the tree inherit this environment: an installed package has its
    # bytecode compiled, so they must not compile every module from source at each start
    # (2-3 CPU-s per process, which the CPU per Service would count).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    settings = Settings(
        services=args.services,
        nodes=args.nodes,
        latency_ms=args.latency_ms,
        provisioning_delay=args.provisioning_delay,
        kube_qps=args.kube_api_qps,
        timeout=args.timeout,
    )
    runs: dict[Config, list[Run]] = {}
    for config in configs(args):
        count = args.runs_at_1 if config.concurrency == 1 else args.runs
        # The capped run shows where the bucket stops it; one is enough.
        count = 1 if config.cloud_qps != args.cloud_api_qps else count
        for index in range(count):
            run = timed_run(config, settings=settings)
            runs.setdefault(config, []).append(run)
            print(
                f"{config.label} --cloud-api-qps {config.cloud_qps} run {index + 1}/{count}: "
                f"{run.seconds:.1f} s, {run.lbs} LBs, {run.fips} FIPs, pyccm CPU "
                f"{pyccm_cpu_ms(run, n=settings.services):.1f} ms / Service",
                flush=True,
            )
    phases = None
    if args.calls_concurrency:
        config = Config(shards=1, syncs=args.calls_concurrency, cloud_qps=args.cloud_api_qps)
        period = args.resync_period or _resync_period(runs.get(config, []))
        phases = phases_run(config, settings=settings, resync_period=period)
        done = phases[1]
        reads = [
            done.resync.per_service(settings.services, "read"),
            done.later_resync.per_service(settings.services, "read"),
        ]
        print(
            f"phases: resync {done.resync_seconds:.1f} s ({reads[0]:.2f} reads / Service, "
            f"{done.resync_cpu / settings.services * 1000:.2f} ms CPU / Service), "
            f"later resync {done.later_resync_seconds:.1f} s ({reads[1]:.2f} reads / Service, "
            f"{done.later_resync_cpu / settings.services * 1000:.2f} ms CPU / Service), "
            f"delete {done.delete_seconds:.1f} s"
        )
    upstream = None
    if args.baseline_services:
        upstream = upstream_baseline(settings, services=args.baseline_services)
        print(
            f"upstream's algorithm: {upstream.services} Services in {upstream.seconds:.1f} s "
            f"({upstream.per_service:.2f} s each)",
            flush=True,
        )
    baseline = Config(shards=1, syncs=1, cloud_qps=args.cloud_api_qps)
    table = render(runs, settings=settings, phases=phases, baseline=baseline, upstream=upstream)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(table)
    plot(runs, settings=settings, baseline=baseline, path=out.with_suffix(".png"))
    print(table)
    print(f"written: {out.with_suffix('.md')} and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
