"""How the tree grows with the cluster: `python -m bench.scaling [--quick]`.

The large-cluster bench's converge phase and memory reading (bench.large_cluster's
world, tree, `converge`, memory sampler, CPU by process and cloud-call counting, imported)
at each of `--sizes` nodes with `--lb-services` LoadBalancer Services, and at each
`--extra` NODESxLB size. A size's Services are `--services-per-node` per node (2: the
large-cluster bench's 10,000 at 5,000 nodes), of which the LB ones, the rest ClusterIP.
One run of a size:

1. **converge** from nothing: tree start → every node initialized, every LB Service with
   its ingress, every pool holding every eligible node, every pod CIDR routed; the CPU
   seconds of each process meanwhile (the tree's, both simulators' from the tree's start,
   the bench driver's, and the whole machine's, so the rest is other work on it), cloud
   calls by operation and the answers that were errors, the tree's PSS sampled every
   second, and its PSS once the tree has settled (every worker synced, queues idle);
2. **cold start**: the tree restarted → every worker synced and every LB verified; each
   process's PSS and RSS then (what a pod holds once synced), and the peak meanwhile;
3. **steady state**: % of a core per process in a quiet window, then while every node's
   kubelet posts its status heartbeat every `--heartbeat-period` s (bench.large_cluster's
   kubelet churn).

The load average is read before and after each run. Writes bench/results/scaling.md and
.png after each size (`--quick`: 100 and 300 nodes, to a temp dir unless `--out` says
otherwise); the table's sizing section fits the tree's memory to the nodes and the
members, for the operator guide's sizing rules.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.large_cluster import (
    Bench,
    Kubelets,
    KubeView,
    Peaks,
    Settings,
    SimulatorShare,
    add_world_flags,
    cloud_of,
    cold_start,
    commit,
    converge,
    is_simulator,
    memory,
    pss_mb,
    running_tree,
    sampling,
    settings_of,
    simulator_share,
    synced_and_verified,
    tree_processes,
    unexpected_exits,
    world_of,
)
from bench.large_cluster import kubelet_churn as steady_state
from bench.service_scale import CPUS, machine_cpu
from pyccm import lifetime

RESULTS = Path(__file__).parent / "results"
WORKERS = 4  # node, lifecycle, service, route
DRIVER = "bench driver"
# Memory limit = the largest PSS seen x this (the sizing section's rule), rounded up to ROUND.
LIMIT_MARGIN = 1.25
ROUND_MIB = 32


@dataclass(frozen=True)
class Size:
    nodes: int
    lb_services: int

    @property
    def label(self) -> str:
        return f"{self.nodes:,} x {self.lb_services:,}"


@dataclass(frozen=True)
class Measured:
    """One run of one size."""

    services: int
    pools: int
    members: int
    converged: float  # s; infinity when it did not
    nodes_at: float
    ingress_at: float
    members_at: float
    routes_at: float
    wall: float  # the converge window: tree start → the last poll
    calls: Counter[str]  # while converging, by operation
    errors: Counter[int]  # answers >= 400 while converging, by status
    cpu: dict[str, float]  # CPU-s while converging: the tree's and the simulators' processes
    driver_cpu: float  # this process's CPU-s meanwhile (its polls, its memory sampler)
    machine_busy: float  # the whole machine's busy CPU-s meanwhile
    peak_converging: float  # the tree's PSS (MiB), sampled every second while converging
    peak_converging_by_process: dict[str, float]
    held: dict[str, float]  # PSS (MiB) by process once the converged tree settled
    held_settled: bool
    cold_seconds: float
    cold_calls: int
    pss_synced: dict[str, float]  # by process, the restarted tree synced
    rss_synced: dict[str, float]
    peak_cold: float  # the tree's PSS (MiB) peak while the restarted tree synced
    quiet_cpu: dict[str, float]  # % of a core
    heartbeat_cpu: dict[str, float]
    heartbeat_rate: float
    load_before: float
    load_after: float
    exits: list[str]

    @property
    def share(self) -> SimulatorShare:
        return simulator_share(self.cpu, wall=self.wall)

    @property
    def tree_cpu(self) -> float:
        return sum(v for role, v in self.cpu.items() if not is_simulator(role))

    @property
    def other_cpu(self) -> float:
        """The machine's busy CPU-s that were neither the tree, the simulators nor the bench."""
        return max(0.0, self.machine_busy - sum(self.cpu.values()) - self.driver_cpu)

    @property
    def steady(self) -> float:
        """What the tree holds when idle, however it got there (MiB PSS)."""
        return max(sum(self.pss_synced.values()), sum(self.held.values()))

    @property
    def highest(self) -> float:
        """The largest tree PSS seen in the run (MiB)."""
        return max(self.steady, self.peak_converging, self.peak_cold)

    @property
    def converge_cores(self) -> float:
        """The tree's average CPU use while converging, in cores."""
        return self.tree_cpu / self.wall if self.wall else 0.0


@dataclass(frozen=True)
class Result:
    size: Size
    runs: list[Measured]

    @property
    def median(self) -> Measured:
        """The run whose converge time is the median (the lower one of an even count)."""
        ordered = sorted(self.runs, key=lambda r: r.converged)
        return ordered[(len(ordered) - 1) // 2]


# --- one run -------------------------------------------------------------------------------


def measure(settings: Settings) -> Measured:
    load_before = os.getloadavg()[0]
    with ExitStack() as stack:
        world = stack.enter_context(world_of(settings, prefix="pyccm-scaling-"))
        bench = Bench(settings=settings, world=world, kube=KubeView(world), cloud=cloud_of(world))
        stack.callback(bench.kube.client.close)
        kubelets = Kubelets(world)
        stack.callback(kubelets.close)
        busy_before, _ = machine_cpu()
        driver_before = time.process_time()
        bench.mark_cpu()
        with sampling(world, bench.peaks), running_tree(world, settings) as started:
            converged = converge(bench, started)
            busy_after, _ = machine_cpu()
            driver_cpu = time.process_time() - driver_before
            print(f"  converged in {converged.seconds:.1f}s; settling", flush=True)
            held_settled = settled(bench, since=started.monotonic)
            held = pss_mb(tree_processes(world))
        calls = bench.cloud.calls(0)
        cloud_mark, kube_mark = bench.cloud.mark(), bench.kube.mark()
        cold_peaks = Peaks()
        with sampling(world, cold_peaks), running_tree(world, settings) as started:
            cold = cold_start(bench, started, cloud_mark=cloud_mark, kube_mark=kube_mark)
            print(f"  cold start {cold.seconds:.1f}s", flush=True)
            synced = memory(bench)
            steady = steady_state(bench, kubelets)
            exits = unexpected_exits(world)
            pools = sum(len(s.spec.ports) for s in bench.kube.lb_services())
    last = converged.timeline[-1]
    return Measured(
        services=settings.services,
        pools=pools,
        members=last.members_wanted,
        converged=converged.seconds,
        nodes_at=converged.nodes_at,
        ingress_at=converged.ingress_at,
        members_at=converged.members_at,
        routes_at=converged.routes_at,
        wall=last.seconds,
        calls=converged.calls,
        errors=Counter(int(c["status"]) for c in calls if int(c["status"]) >= 400),
        cpu=converged.cpu,
        driver_cpu=driver_cpu,
        machine_busy=busy_after - busy_before,
        peak_converging=converged.peak_pss_mb,
        peak_converging_by_process=dict(bench.peaks.pss_mb),
        held=held,
        held_settled=held_settled,
        cold_seconds=cold.seconds,
        cold_calls=sum(cold.calls.values()),
        pss_synced=synced.tree_pss_mb,
        rss_synced=synced.tree_mb,
        peak_cold=cold_peaks.tree_pss_mb,
        quiet_cpu=steady.idle_cpu,
        heartbeat_cpu=steady.cpu,
        heartbeat_rate=steady.heartbeats.rate,
        load_before=load_before,
        load_after=os.getloadavg()[0],
        exits=exits,
    )


def settled(bench: Bench, *, since: float) -> bool:
    """Wait (to the phase timeout) until the tree is synced with idle queues, twice in a
    row 0.25 s apart, as the cold start waits; False if it never was."""
    deadline = since + bench.settings.timeout
    confirmed = 0
    while confirmed < 2 and time.monotonic() < deadline:
        done = synced_and_verified(
            bench.world, lb_services=bench.settings.lb_services, workers=WORKERS
        )
        confirmed = confirmed + 1 if done else 0
        time.sleep(0.25)
    return confirmed >= 2


# --- the sizing fit --------------------------------------------------------------------------


@dataclass(frozen=True)
class Fit:
    """MiB ≈ base + per_node x nodes + per_member x members (least squares over the rows);
    `per_member` is None when the rows cannot tell it from `per_node` (one LB count)."""

    base: float
    per_node: float
    per_member: float | None
    worst: float  # the largest |measured - fitted| over the rows, MiB


def fit(results: Sequence[Result], value: Callable[[Measured], float]) -> Fit | None:
    """None for fewer than two sizes."""
    import numpy

    if len({r.size for r in results}) < 2:
        return None
    nodes = [float(r.size.nodes) for r in results]
    members = [float(r.median.members) for r in results]
    # Members are nodes x pools: with one pool count they are a multiple of the nodes.
    separate = len({r.median.pools for r in results}) > 1 and len(results) >= 3
    columns = [[1.0] * len(results), nodes] + ([members] if separate else [])
    measured = [value(r.median) for r in results]
    solution = numpy.linalg.lstsq(numpy.array(columns).T, numpy.array(measured), rcond=None)[0]
    base, per_node = float(solution[0]), float(solution[1])
    per_member = float(solution[2]) if separate else None
    fitted = [
        base + per_node * n + (per_member or 0.0) * m for n, m in zip(nodes, members, strict=True)
    ]
    worst = max(abs(have - want) for have, want in zip(measured, fitted, strict=True))
    return Fit(base=base, per_node=per_node, per_member=per_member, worst=worst)


def mib_up(value: float) -> int:
    return int(math.ceil(value / ROUND_MIB) * ROUND_MIB)


def millicores_up(cores: float) -> int:
    return max(100, int(math.ceil(cores * 10) * 100))


# --- the report ----------------------------------------------------------------------------


def render(results: Sequence[Result], *, args: argparse.Namespace, quick: bool) -> str:
    lines = [
        "# How the tree grows: nodes, LoadBalancer Services, memory, time, calls and CPU"
        + (" (`--quick`)" if quick else ""),
        "",
        *_setup(results, args),
        "",
        "| nodes | LB Services (ClusterIP) | pools / members | converge (s): all; nodes / "
        "ingress / pools full / routes | tree PSS (MiB): synced / held after converging / "
        "peak converging / peak at cold start | cloud calls converging (errors) | CPU-s "
        "converging: tree / simulators / bench / other work | simulators' CPU: of the run's "
        "CPU-s / of wall x cores | load before → after |",
        "| ---: | ---: | ---: | --- | --- | --- | --- | --- | --- |",
        *(_row(r) for r in results),
        "",
        *_by_process(
            results,
            "Tree PSS by process once synced (MiB), the restarted tree",
            lambda m: m.pss_synced,
        ),
        *_by_process(
            results,
            "Tree PSS by process at its peak while converging (MiB; each process's own peak, "
            "so the column may add up to more than the tree's peak)",
            lambda m: m.peak_converging_by_process,
        ),
        *_by_process(
            results,
            "RSS by process once synced (MiB): what each process needs in a pod of its own "
            "(split mode), where no library page is shared",
            lambda m: m.rss_synced,
        ),
        *_by_process(
            results,
            "CPU-s by process while converging (the simulators' from the tree's start; the "
            "bench driver is this process: its polls of both APIs and its memory sampler)",
            lambda m: {**m.cpu, DRIVER: m.driver_cpu},
        ),
        *_steady(results),
        *_calls(results),
        *_sizing(results),
    ]
    return "\n".join(lines) + "\n"


def _setup(results: Sequence[Result], args: argparse.Namespace) -> list[str]:
    body = args.max_request_body_size
    limit = "the services' default (114,688 bytes)" if body is None else f"{body:,} bytes"
    runs = max(len(r.runs) for r in results)
    return [
        f"Each size: both simulators and the real supervisord tree, as `bench.large_cluster` "
        f"runs them ({args.latency_ms:g} ms per cloud call, Octavia provisioning "
        f"{args.provisioning_delay:g} s, manager `--kube-api-qps {args.kube_api_qps}`, "
        f"workers `--cloud-api-qps {args.cloud_api_qps}`, `--concurrent-node-syncs "
        f"{args.concurrent_node_syncs}`, `--concurrent-service-syncs "
        f"{args.concurrent_service_syncs}`; cloud request body limit {limit}). Every node is a "
        f"member of every pool (Services with 2 ports have 2 pools). Services: "
        f"{args.services_per_node:g} per node, of which the LB ones (the large-cluster bench's "
        f"10,000 at 5,000 nodes). {runs} run(s) per size: the converge column is the median "
        "(each run in brackets), every other figure is the median run's. MiB: smaps_rollup's "
        f"and /proc's kB / 1024. {CPUS} CPUs, shared with other work: the load average (1 "
        "min) before and after each run, and the CPU-s of the machine's other work while "
        f"converging, are in the table. Commit {commit()}, {time.strftime('%Y-%m-%d %H:%M')}. "
        "Re-run: `python -m bench.scaling` (`--quick` for 100 and 300 nodes).",
    ]


def _seconds(value: float) -> str:
    return f"{value:.1f}" if math.isfinite(value) else "**never**"


def _row(result: Result) -> str:
    m = result.median
    size = result.size
    times = [r.converged for r in result.runs]
    converge = _seconds(statistics.median(times))
    if len(times) > 1:
        converge += f" ({', '.join(_seconds(t) for t in times)})"
    errors = ", ".join(f"{k}: {v}" for k, v in sorted(m.errors.items())) or "none"
    share = m.share
    held = f"{sum(m.held.values()):.0f}" + ("" if m.held_settled else " (not settled)")
    loads = "; ".join(f"{r.load_before:.1f} → {r.load_after:.1f}" for r in result.runs)
    return (
        f"| {size.nodes:,} | {size.lb_services:,} ({m.services - size.lb_services:,}) | "
        f"{m.pools:,} / {m.members:,} | **{converge}**; {_seconds(m.nodes_at)} / "
        f"{_seconds(m.ingress_at)} / {_seconds(m.members_at)} / {_seconds(m.routes_at)} | "
        f"**{sum(m.pss_synced.values()):.0f}** / {held} / **{m.peak_converging:.0f}** / "
        f"{m.peak_cold:.0f} | {sum(m.calls.values()):,} ({errors}) | {m.tree_cpu:.1f} / "
        f"{share.simulators:.1f} / {m.driver_cpu:.1f} / {m.other_cpu:.1f} | "
        f"**{share.of_cpu:.0%}** / {share.of_capacity:.0%} | {loads} |"
    )


def _table(results: Sequence[Result], rows: dict[str, list[str]], corner: str) -> list[str]:
    return [
        f"| {corner} | " + " | ".join(r.size.label for r in results) + " |",
        "| --- |" + " ---: |" * len(results),
        *(f"| {name} | " + " | ".join(cells) + " |" for name, cells in rows.items()),
    ]


def _by_process(
    results: Sequence[Result], title: str, values: Callable[[Measured], dict[str, float]]
) -> list[str]:
    found = [values(r.median) for r in results]
    roles = sorted({role for f in found for role in f}, key=lambda r: (is_simulator(r), r))
    rows = {role: [f"{f[role]:.1f}" if role in f else "n/a" for f in found] for role in roles}
    rows["**all**"] = [f"**{sum(f.values()):.1f}**" for f in found]
    return [f"## {title}", "", *_table(results, rows, "process (nodes x LB)"), ""]


def _steady(results: Sequence[Result]) -> list[str]:
    rows: dict[str, list[str]] = {}
    runs = [r.median for r in results]
    roles = sorted({role for m in runs for role in m.heartbeat_cpu}, key=lambda r: (r == DRIVER, r))
    for role in roles:
        rows[role] = [
            f"{m.quiet_cpu.get(role, 0.0):.1f} / {m.heartbeat_cpu.get(role, 0.0):.1f}" for m in runs
        ]
    rows["**the tree**"] = [
        f"**{_tree(m.quiet_cpu):.1f} / {_tree(m.heartbeat_cpu):.1f}**" for m in runs
    ]
    rows["heartbeats per second sent"] = [f"{m.heartbeat_rate:.0f}" for m in runs]
    return [
        "## Steady state: % of a core, quiet / while every kubelet posts its heartbeat",
        "",
        "The restarted tree once synced: a quiet window, then every node's status heartbeat "
        "(a strategic-merge PATCH of `nodes/<name>/status`, over HTTP, round-robin) at "
        "nodes / heartbeat period per second:",
        "",
        *_table(results, rows, "process (nodes x LB)"),
        "",
    ]


def _tree(cpu: dict[str, float]) -> float:
    return sum(v for role, v in cpu.items() if not is_simulator(role) and role != DRIVER)


def _calls(results: Sequence[Result]) -> list[str]:
    runs = [r.median for r in results]
    total: Counter[str] = Counter()
    for m in runs:
        total.update(m.calls)
    rows = {f"`{op}`": [f"{m.calls.get(op, 0):,}" for m in runs] for op, _ in total.most_common()}
    rows["**all**"] = [f"**{sum(m.calls.values()):,}**" for m in runs]
    rows["cold start (the restarted tree syncing)"] = [f"{m.cold_calls:,}" for m in runs]
    rows["cold start seconds"] = [_seconds(m.cold_seconds) for m in runs]
    return [
        "## Cloud calls while converging, by operation",
        "",
        *_table(results, rows, "operation (nodes x LB)"),
        "",
    ]


def _sizing(results: Sequence[Result]) -> list[str]:
    steady = fit(results, lambda m: m.steady)
    highest = fit(results, lambda m: m.highest)
    rows = []
    for result in results:
        m = result.median
        rows.append(
            f"| {result.size.label} | {m.steady:.0f} | {m.highest:.0f} | "
            f"**{mib_up(m.steady)}Mi** | **{mib_up(m.highest * LIMIT_MARGIN)}Mi** | "
            f"**{millicores_up(_tree(m.heartbeat_cpu) / 100)}m** | {m.converge_cores:.2f} |"
        )
    return [
        "## Sizing the pod (the single-pod tree), from these rows",
        "",
        "The rules of the operator guide's sizing section "
        "([docs/operator-guide.md](../../docs/operator-guide.md#sizing)), applied to each row: "
        "memory request = the tree's PSS when idle (the larger of once synced and held after "
        f"converging), rounded up to {ROUND_MIB} MiB; memory limit = the largest tree PSS of "
        f"the run x {LIMIT_MARGIN:g}, rounded up; CPU request = the tree's steady state "
        "while the kubelets post, rounded up to 100m; converge uses the last column's cores "
        "on average (no CPU limit: a limit below it slows the converge in proportion).",
        "",
        "| nodes x LB | idle PSS (MiB) | largest PSS (MiB) | memory request | memory limit | "
        "CPU request | cores while converging |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        *rows,
        "",
        "Fitted over the rows (MiB ≈ base + per node x nodes + per member x members, members = "
        "nodes x LB pools), for a cluster between the measured sizes:",
        "",
        "| what | base (MiB) | per 1,000 nodes (MiB) | per 100,000 members (MiB) | worst row "
        "off by (MiB) |",
        "| --- | ---: | ---: | ---: | ---: |",
        _fit_row("idle PSS (the request)", steady),
        _fit_row("largest PSS (the limit, before the margin)", highest),
        "",
    ]


def _fit_row(what: str, found: Fit | None) -> str:
    if found is None:
        return f"| {what} | n/a: one size only | | | |"
    member = (
        "n/a: one LB count (in per node)"
        if found.per_member is None
        else f"{found.per_member * 100_000:.1f}"
    )
    return (
        f"| {what} | {found.base:.0f} | {found.per_node * 1000:.1f} | {member} | "
        f"{found.worst:.0f} |"
    )


def plot(results: Sequence[Result], *, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, ((memory_axes, time_axes), (calls_axes, cpu_axes)) = plt.subplots(2, 2, figsize=(13, 9))
    markers = "os^Dv"
    for index, lb in enumerate(sorted({r.size.lb_services for r in results})):
        line = sorted((r for r in results if r.size.lb_services == lb), key=lambda r: r.size.nodes)
        nodes = [r.size.nodes for r in line]
        runs = [r.median for r in line]
        style: dict[str, Any] = {
            "marker": markers[index % len(markers)],
            "linestyle": "-" if len(line) > 1 else "none",
        }
        curves: list[tuple[Any, str, list[float]]] = [
            (memory_axes, "PSS synced", [sum(m.pss_synced.values()) for m in runs]),
            (memory_axes, "held after converging", [sum(m.held.values()) for m in runs]),
            (memory_axes, "peak converging", [m.peak_converging for m in runs]),
            (time_axes, "converged", [m.converged for m in runs]),
            (time_axes, "nodes initialized", [m.nodes_at for m in runs]),
            (time_axes, "every ingress", [m.ingress_at for m in runs]),
            (calls_axes, "converging", [float(sum(m.calls.values())) for m in runs]),
            (calls_axes, "cold start", [float(m.cold_calls) for m in runs]),
            (cpu_axes, "tree", [m.tree_cpu for m in runs]),
            (cpu_axes, "simulators", [m.share.simulators for m in runs]),
        ]
        for axes, label, values in curves:
            axes.plot(nodes, values, label=f"{label}, {lb:,} LB", **style)
    memory_axes.set(title="Tree memory", xlabel="nodes", ylabel="MiB PSS")
    time_axes.set(title="Converge from nothing", xlabel="nodes", ylabel="seconds")
    calls_axes.set(title="Cloud calls", xlabel="nodes", ylabel="calls")
    cpu_axes.set(title="CPU while converging", xlabel="nodes", ylabel="CPU-seconds")
    for axes in (memory_axes, time_axes, calls_axes, cpu_axes):
        axes.legend(fontsize=7)
        axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


# --- main ----------------------------------------------------------------------------------------


def parse_size(text: str) -> Size:
    nodes, _, lb = text.lower().partition("x")
    return Size(nodes=int(nodes), lb_services=int(lb))


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,2500,5000,10000", help="nodes, comma-separated")
    parser.add_argument("--lb-services", type=int, default=200, help="at each of --sizes")
    parser.add_argument(
        "--extra", default="5000x1000", help="more sizes as NODESxLB, comma-separated ('': none)"
    )
    parser.add_argument("--services-per-node", type=float, default=2.0, help="LB and ClusterIP")
    parser.add_argument("--runs", type=int, default=1, help="runs per size (the median shown)")
    parser.add_argument("--kubelet-seconds", type=float, default=30.0)
    add_world_flags(parser)
    parser.add_argument(
        "--max-request-body-size",
        type=int,
        default=4_194_304,
        help="the simulated cloud's request body limit (0 = none; default 4 MiB, as a large "
        "cluster's Octavia needs)",
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="per phase")
    parser.add_argument("--quick", action="store_true", help="100 and 300 nodes (a few minutes)")
    parser.add_argument(
        "--out", default="", help="output path without suffix (default bench/results/scaling)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.lb_services, args.extra = "100,300", 20, "300x60"
        args.kubelet_seconds, args.timeout = 10.0, 300.0
        args.out = args.out or str(Path(tempfile.mkdtemp(prefix="scaling-")) / "scaling")
    args.out = args.out or str(RESULTS / "scaling")
    return args


def sizes_of(args: argparse.Namespace) -> list[Size]:
    listed = [Size(int(n), args.lb_services) for n in args.sizes.split(",") if n.strip()]
    return listed + [parse_size(s) for s in args.extra.split(",") if s.strip()]


def settings_for(args: argparse.Namespace, size: Size) -> Settings:
    """bench.large_cluster's settings (its poll interval by size included) for one size,
    with nothing of its later phases: no churn, no label toggles, no SIGTERM drill."""
    fields = {**vars(args), "nodes": size.nodes, "lb_services": size.lb_services}
    fields["services"] = max(size.lb_services, round(args.services_per_node * size.nodes))
    fields |= {"churn": 0, "node_sync_toggles": 0, "sigterm_rounds": 0}
    return settings_of(argparse.Namespace(**fields))


def main() -> int:
    args = parse_args()
    # As bench.large_cluster: stopped trees and simulators on any signal, tracebacks of a
    # crash in C, compiled bytecode kept, two glibc heaps per process as the image sets.
    lifetime.stop_on_signals()
    os.environ["PYTHONFAULTHANDLER"] = "1"
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ.setdefault("MALLOC_ARENA_MAX", "2")
    results: list[Result] = []
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for size in sizes_of(args):
        settings = settings_for(args, size)
        runs = []
        for index in range(args.runs):
            print(f"{size.label}: run {index + 1}/{args.runs}", flush=True)
            runs.append(measure(settings))
        results.append(Result(size=size, runs=runs))
        # After each size, so that a long run that fails later keeps the sizes it measured.
        out.with_suffix(".md").write_text(render(results, args=args, quick=args.quick))
        plot(results, path=out.with_suffix(".png"))
        print(f"written: {out.with_suffix('.md')} and .png ({len(results)} sizes)", flush=True)
    print(out.with_suffix(".md").read_text())
    crashed = [e for r in results for m in r.runs for e in m.exits]
    never = [r.size.label for r in results for m in r.runs if not math.isfinite(m.converged)]
    for what, found in (("crashes", crashed), ("not converged", never)):
        if found:
            print(f"{what}: {found}", file=sys.stderr)
    return 1 if crashed or never else 0


if __name__ == "__main__":
    sys.exit(main())
