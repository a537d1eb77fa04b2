"""What the tree's memory is made of: `python -m bench.tree_memory`.

Measures, changes nothing. Two parts:

1. **The tree.** Both simulators and the real supervisord tree as `pyccm demo` runs them
   (`--nodes`, `--services`; `pyccm_sim.demo`'s own helpers and settings). Once it has converged
   (every node initialized, every LoadBalancer Service with its ingress, every pod CIDR
   routed: the demo's own condition, with a deadline) and then settled for `--settle`
   seconds, each process of the tree (supervisord and every program it runs, found as
   supervisord's children and named by their command line) is read from
   /proc/<pid>/smaps_rollup: PSS, RSS, private (Private_Clean + Private_Dirty) and shared
   (Shared_Clean + Shared_Dirty), and PSS split into anonymous memory and file mappings.
   PSS sums across processes (a page shared by n processes counts 1/n in each); RSS does
   not (a shared page counts in full in every process that maps it), so only the PSS total
   is the tree's footprint. With `--runs` > 1 the run with the median total PSS is shown,
   so its rows add up to its totals; every run's total is listed.
2. **Imports.** In a fresh interpreter per step, PSS (and private memory) right after
   importing a ladder of modules, each step in its own process, reading its own
   smaps_rollup; the medians over `--runs`. Then the modules that take longest to import
   (cumulative) under `python -X importtime -c 'import pyccm.workers.app'`, and the
   import time by top-level package (its modules' own times summed), medians over `--runs`.

Environment as in the image (Containerfile): MALLOC_ARENA_MAX=2, bytecode compiled (the
bench removes PYTHONDONTWRITEBYTECODE so the first import compiles it once; a warm-up
import runs before anything is measured).

Writes bench/results/tree_memory.md (`--quick`: 3 nodes, 1 Service, a short settle and one
run, to a temp dir unless `--out` says otherwise). Whatever way the bench ends, every
process it started ends with it (`pyccm.lifetime`).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.large_cluster import commit, tree_processes
from pyccm import lifetime
from pyccm.kubeapi.client import KubeClient, KubeSettings
from pyccm_sim.demo import (
    CloudView,
    World,
    converged_state,
    demo_kube_qps,
    demo_timeout,
    process_tree,
    simulators,
)
from tests.support.waiting import wait_for

RESULTS = Path(__file__).parent / "results"
REPO = Path(__file__).resolve().parent.parent
# The tree's processes with one service shard, as `bench.service_scale._role` names them.
TREE_ROLES = ("supervisord", "manager", "cloud-node", "cloud-node-lifecycle", "service-0", "route")
WORKERS = ("cloud-node", "cloud-node-lifecycle", "service-0", "route")
# What each kind of process of the tree imports once running: the `pyccm` entry point, its
# app and what its app builds (tests/test_lean_imports.py checks what they must not load).
WORKER_MODULES = (
    "pyccm.cli",
    "pyccm.workers.cli",
    "pyccm.workers.app",
    "pyccm.provider.openstack",
    "pyccm.provider.openstack.cloud",
    "pyccm.provider.openstack.transport.connection",
    "pyccm.provider.openstack.loadbalancer",
    "pyccm.provider.openstack.routes.router",
    "pyccm.provider.openstack.instances.nova",
    *(f"pyccm.workers.{name}.controller" for name in ("node", "lifecycle", "service", "route")),
)
MANAGER_MODULES = ("pyccm.cli", "pyccm.manager.cli", "pyccm.manager.app", "pyccm.manager.http")
# (label, modules imported): each step in a fresh interpreter; "" imports nothing.
LADDER: tuple[tuple[str, str], ...] = (
    ("bare python (venv, site)", ""),
    ("msgspec + zmq", "msgspec, zmq"),
    (
        "the libraries every pyccm process loads: importlib.metadata, prometheus_client, "
        "urllib3, msgspec, zmq, argparse, logging",
        "importlib.metadata, prometheus_client, urllib3, msgspec, zmq, argparse, logging",
    ),
    ("asyncio (no longer loaded)", "asyncio"),
    # The libraries the tree no longer loads, for scale.
    ("keystoneauth1 + requests (no longer loaded)", "keystoneauth1.identity, requests"),
    ("openstack (loaded only to read a clouds.yaml)", "openstack"),
    ("kubernetes.client (no longer loaded)", "kubernetes.client"),
    (
        "a worker: " + ", ".join(WORKER_MODULES[:3]) + ", the provider, the controllers",
        ", ".join(WORKER_MODULES),
    ),
    ("the manager: " + ", ".join(MANAGER_MODULES), ", ".join(MANAGER_MODULES)),
)
IMPORTTIME_TARGET = "pyccm.workers.app"
# Printed by the ladder's child after its imports: the module count, then its smaps_rollup.
CHILD = (
    "import gc, sys\n"
    "gc.collect()\n"
    "sys.stdout.write(f'{len(sys.modules)}\\n' + open('/proc/self/smaps_rollup').read())\n"
)
KIB_PER_MIB = 1024
FULL = {"nodes": 20, "services": 5, "settle": 20.0, "runs": 3, "top": 20}
QUICK = {"nodes": 3, "services": 1, "settle": 2.0, "runs": 1, "top": 10}


# --- reading memory ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Memory:
    """One process's smaps_rollup, in KiB."""

    pss: int
    rss: int
    private: int
    shared: int
    pss_anon: int
    pss_file: int

    def __add__(self, other: Memory) -> Memory:
        return Memory(
            pss=self.pss + other.pss,
            rss=self.rss + other.rss,
            private=self.private + other.private,
            shared=self.shared + other.shared,
            pss_anon=self.pss_anon + other.pss_anon,
            pss_file=self.pss_file + other.pss_file,
        )


ZERO = Memory(pss=0, rss=0, private=0, shared=0, pss_anon=0, pss_file=0)


def parse_rollup(text: str) -> Memory:
    """A smaps_rollup's fields (`Name:   123 kB` lines; the first line is the range)."""
    fields: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        words = value.split()
        if len(words) == 2 and words[1] == "kB" and words[0].isdigit():
            fields[name.strip()] = int(words[0])
    if "Pss" not in fields or "Rss" not in fields:
        raise ValueError(f"not a smaps_rollup: {text[:80]!r}")
    return Memory(
        pss=fields["Pss"],
        rss=fields["Rss"],
        private=fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0),
        shared=fields.get("Shared_Clean", 0) + fields.get("Shared_Dirty", 0),
        # Kernels before 5.x have no Pss_Anon/Pss_File: 0, and the report says "n/a".
        pss_anon=fields.get("Pss_Anon", 0),
        pss_file=fields.get("Pss_File", 0),
    )


def memory_of(pid: int) -> Memory | None:
    """The process's smaps_rollup; None when it is gone."""
    try:
        return parse_rollup(Path(f"/proc/{pid}/smaps_rollup").read_text())
    except (OSError, ValueError):
        return None


def child_env() -> dict[str, str]:
    """This environment as the tree's (set in main), for the import subprocesses."""
    return dict(os.environ)


# --- 1. the tree ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TreeRun:
    processes: dict[str, Memory]  # by role
    pids: dict[str, int]
    converge_seconds: float
    restarted: list[str]  # roles whose pid changed during the settle

    def total(self, *, supervisord: bool = True) -> Memory:
        parts = [m for role, m in self.processes.items() if supervisord or role != "supervisord"]
        return sum(parts, ZERO)


def tree_run(*, nodes: int, services: int, settle: float, timeout: float) -> TreeRun:
    workdir = Path(tempfile.mkdtemp(prefix="pyccm-tree-memory-"))
    try:
        with (
            simulators(workdir, nodes=nodes, services=services, latency=0.0) as world,
            process_tree(world, kube_api_qps=demo_kube_qps(nodes)),
        ):
            started = time.monotonic()
            wait_converged(world, nodes=nodes, services=services, timeout=timeout)
            converged = time.monotonic() - started
            before = wait_for(
                lambda: _all_roles(world),
                timeout=60,
                what=f"every process of the tree running ({', '.join(TREE_ROLES)})",
            )
            print(f"  converged in {converged:.1f}s; settling {settle:g}s", flush=True)
            time.sleep(settle)  # the "settled": a fixed time after convergence
            pids = wait_for(
                lambda: _all_roles(world), timeout=60, what="every process after the settle"
            )
            sizes = {role: memory_of(pid) for role, pid in pids.items()}
            missing = [role for role, size in sizes.items() if size is None]
            if missing:
                raise SystemExit(f"gone while being read: {', '.join(missing)}")
    except BaseException:
        print(f"  logs kept in {workdir}", file=sys.stderr)
        raise
    shutil.rmtree(workdir, ignore_errors=True)
    return TreeRun(
        processes={role: size for role, size in sizes.items() if size is not None},
        pids=pids,
        converge_seconds=converged,
        restarted=sorted(role for role in pids if before.get(role) != pids[role]),
    )


def wait_converged(world: World, *, nodes: int, services: int, timeout: float) -> None:
    """The demo's own condition: nodes initialized, Services with ingress, routes."""
    kube = KubeClient(settings=KubeSettings(kubeconfig=str(world.kubeconfig)))
    cloud = CloudView(world.cloud_url)
    try:
        wait_for(
            lambda: converged_state(kube, cloud).done(nodes=nodes, services=services),
            timeout=timeout,
            what="the demo converged",
            poll=1.0,
        )
    finally:
        kube.close()


def _all_roles(world: World) -> dict[str, int] | None:
    found = tree_processes(world)
    return found if all(role in found for role in TREE_ROLES) else None


# --- 2. imports ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    memory: Memory
    modules: int


def python(*args: str) -> subprocess.CompletedProcess[str]:
    """This venv's Python run with `args` from the repository, as the tree's processes run
    (`child_env`), tied to this process; its output captured."""
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=child_env(),
        check=False,
        **lifetime.tied(),
    )


def import_step(modules: str) -> Step:
    """A fresh interpreter that imports `modules` and reads its own smaps_rollup."""
    code = (f"import {modules}\n" if modules else "") + CHILD
    done = python("-c", code)
    if done.returncode != 0:
        raise SystemExit(f"import {modules} failed: {done.stderr.strip().splitlines()[-1:]}")
    count, _, rollup = done.stdout.partition("\n")
    return Step(memory=parse_rollup(rollup), modules=int(count))


@dataclass(frozen=True)
class ImportTime:
    module: str
    self_us: int
    cumulative_us: int
    depth: int


def parse_importtime(stderr: str) -> list[ImportTime]:
    """`import time: <self> | <cumulative> | <indent><module>` lines (-X importtime)."""
    found = []
    for line in stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        fields = line[len("import time:") :].split("|")
        if len(fields) != 3 or not fields[0].strip().isdigit():
            continue  # the header line
        name = fields[2].rstrip()
        stripped = name.lstrip()
        found.append(
            ImportTime(
                module=stripped,
                self_us=int(fields[0]),
                cumulative_us=int(fields[1]),
                depth=(len(name) - len(stripped) - 1) // 2,
            )
        )
    return found


def import_times(module: str) -> list[ImportTime]:
    done = python("-X", "importtime", "-c", f"import {module}")
    if done.returncode != 0:
        raise SystemExit(f"python -X importtime -c 'import {module}' exited {done.returncode}")
    return parse_importtime(done.stderr)


@dataclass(frozen=True)
class Imports:
    ladder: list[tuple[str, list[Step]]]  # label, one step per run
    times: list[list[ImportTime]]  # one list per run


def measure_imports(runs: int) -> Imports:
    # Warm-up: compiles whatever bytecode is missing, reads the files into the page cache.
    import_step(", ".join(m for _, m in LADDER if m))
    ladder = []
    for label, modules in LADDER:
        steps = [import_step(modules) for _ in range(runs)]
        ladder.append((label, steps))
        print(f"  {label}: PSS {mib(med([s.memory.pss for s in steps]))} MiB", flush=True)
    times = [import_times(IMPORTTIME_TARGET) for _ in range(runs)]
    return Imports(ladder=ladder, times=times)


# --- the report ----------------------------------------------------------------------------------


def mib(kib: float) -> str:
    return f"{kib / KIB_PER_MIB:.1f}"


def med(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def machine_note() -> str:
    fields = dict(
        line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line
    )
    total = int(fields["MemTotal"].split()[0]) / KIB_PER_MIB**2
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{platform.system()} {platform.release()} {platform.machine()}, {os.cpu_count()} CPUs, "
        f"{total:.1f} GiB RAM, Python {platform.python_version()}; load average {load} at the "
        f"end (the machine is shared with other work: PSS and RSS barely depend on load, "
        f"times do)"
    )


def render(
    runs: Sequence[TreeRun],
    imports: Imports,
    *,
    nodes: int,
    services: int,
    settle: float,
    top: int,
    command: str,
) -> str:
    shown = sorted(runs, key=lambda r: r.total().pss)[len(runs) // 2]
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# What the tree's memory is made of: {nodes} nodes, {services} Services",
        "",
        f"{now}, commit {commit()}. {machine_note()}. MALLOC_ARENA_MAX="
        f"{os.environ.get('MALLOC_ARENA_MAX', 'unset')}.",
        "",
        f"Re-run: `{command}`",
        "",
        *_tree_section(runs, shown, settle=settle),
        *_ladder_section(imports),
        *_importtime_section(imports, top=top),
    ]
    return "\n".join(lines) + "\n"


def _tree_section(runs: Sequence[TreeRun], shown: TreeRun, *, settle: float) -> list[str]:
    totals = ", ".join(f"{mib(r.total().pss)}" for r in runs)
    lines = [
        "## The tree, converged and settled",
        "",
        f"`pyccm demo`'s tree (its simulators apart), read {settle:g} s after it converged "
        f"(converged in {shown.converge_seconds:.1f} s). MiB. PSS adds up across processes; "
        f"RSS counts a shared page in every process that maps it, so its sum overstates the "
        f"tree. Private = Private_Clean + Private_Dirty (what the process alone holds); "
        f"shared = Shared_Clean + Shared_Dirty; PSS anon / file: PSS of anonymous memory "
        f"(the heap, Python's objects) and of file mappings (the interpreter, shared "
        f"libraries, native extensions). "
        + (
            f"{len(runs)} runs; shown: the run with the median total PSS (totals of every "
            f"run: {totals} MiB)."
            if len(runs) > 1
            else "One run."
        ),
        "",
        "| process | pid | PSS | RSS | private | shared | PSS anon | PSS file |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for role in sorted(shown.processes, key=_role_order):
        lines.append(_memory_row(role, str(shown.pids[role]), shown.processes[role]))
    lines.append(_memory_row("**tree total**", "", shown.total(), bold=True))
    lines.append(
        _memory_row("**tree without supervisord**", "", shown.total(supervisord=False), bold=True)
    )
    workers = [shown.processes[r] for r in WORKERS if r in shown.processes]
    if workers:
        lines.append(_memory_row("workers only", "", sum(workers, ZERO)))
    restarted = sorted({r for run in runs for r in run.restarted})
    lines += [
        "",
        f"Restarted during a settle (pid changed): {', '.join(restarted) or 'none'}.",
        "",
    ]
    return lines


def _role_order(role: str) -> tuple[int, str]:
    return (TREE_ROLES.index(role) if role in TREE_ROLES else len(TREE_ROLES), role)


def _memory_row(name: str, pid: str, m: Memory, *, bold: bool = False) -> str:
    def cell(kib: int) -> str:
        return f"**{mib(kib)}**" if bold else mib(kib)

    anon = cell(m.pss_anon) if m.pss_anon or m.pss_file else "n/a"
    file = cell(m.pss_file) if m.pss_anon or m.pss_file else "n/a"
    return (
        f"| {name} | {pid} | {cell(m.pss)} | {cell(m.rss)} | {cell(m.private)} | "
        f"{cell(m.shared)} | {anon} | {file} |"
    )


def _ladder_section(imports: Imports) -> list[str]:
    runs = len(imports.ladder[0][1])
    bare = med([s.memory.pss for s in imports.ladder[0][1]])
    bare_private = med([s.memory.private for s in imports.ladder[0][1]])
    lines = [
        "## Import cost, one fresh interpreter per step",
        "",
        f"`python -c 'import …'` then the process reads its own smaps_rollup (after a "
        f"gc.collect()). MiB, medians of {runs} run(s). Each step is its own process, so "
        f"the steps do not add up: a step's cost includes whatever it imports in turn. PSS "
        f"depends on what else maps the same files (the interpreter and libraries are "
        f"shared with every other Python on the machine); private memory is the process's "
        f"own, the better guide to what an import adds.",
        "",
        "| imported | modules | PSS | + PSS over bare | private | + private over bare | RSS |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, steps in imports.ladder:
        pss = med([s.memory.pss for s in steps])
        private = med([s.memory.private for s in steps])
        lines.append(
            f"| {label} | {med([s.modules for s in steps]):.0f} | {mib(pss)} | "
            f"{mib(pss - bare)} | {mib(private)} | {mib(private - bare_private)} | "
            f"{mib(med([s.memory.rss for s in steps]))} |"
        )
    return [*lines, ""]


def _importtime_section(imports: Imports, *, top: int) -> list[str]:
    runs = imports.times
    cumulative: dict[str, list[int]] = {}
    own: dict[str, list[int]] = {}
    by_package: list[Counter[str]] = []
    for run in runs:
        packages: Counter[str] = Counter()
        for t in run:
            cumulative.setdefault(t.module, []).append(t.cumulative_us)
            own.setdefault(t.module, []).append(t.self_us)
            packages[t.module.split(".")[0]] += t.self_us
        by_package.append(packages)
    total = med([sum(p.values()) for p in by_package])
    ranked = sorted(cumulative, key=lambda m: -med(cumulative[m]))[:top]
    lines = [
        f"## Import time of `{IMPORTTIME_TARGET}`",
        "",
        f"`python -X importtime -c 'import {IMPORTTIME_TARGET}'`, medians of {len(runs)} "
        f"run(s), bytecode compiled; on a loaded machine the times are inflated, their "
        f"ranking less so. All imports: {total / 1000:.0f} ms (self times summed). Top "
        f"{top} modules by cumulative time (a module's own time plus its imports'):",
        "",
        "| module | cumulative (ms) | self (ms) |",
        "| --- | ---: | ---: |",
    ]
    for module in ranked:
        lines.append(
            f"| `{module}` | {med(cumulative[module]) / 1000:.1f} | {med(own[module]) / 1000:.1f} |"
        )
    names = {name for p in by_package for name in p}
    ranked_packages = sorted(names, key=lambda n: -med([p[n] for p in by_package]))[:top]
    lines += [
        "",
        "By top-level package (the self times of its modules, summed):",
        "",
        "| package | ms | share |",
        "| --- | ---: | ---: |",
    ]
    for name in ranked_packages:
        ms = med([p[name] for p in by_package])
        lines.append(f"| `{name}` | {ms / 1000:.1f} | {100 * ms / total:.0f} % |")
    return [*lines, ""]


# --- main ----------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, help="as `pyccm demo` (default 20; --quick 3)")
    parser.add_argument("--services", type=int, help="as `pyccm demo` (default 5; --quick 1)")
    parser.add_argument(
        "--settle", type=float, help="seconds after convergence (default 20; --quick 2)"
    )
    parser.add_argument("--runs", type=int, help="runs of each part (default 3; --quick 1)")
    parser.add_argument("--top", type=int, help="rows of the import-time tables (default 20)")
    parser.add_argument(
        "--timeout", type=float, default=None, help="seconds to converge (default: the demo's)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="a tiny tree, one run (the flags given still apply)"
    )
    parser.add_argument(
        "--out", default="", help="the markdown file (default bench/results/tree_memory.md)"
    )
    args = parser.parse_args(argv)
    defaults = QUICK if args.quick else FULL
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.quick:
        args.out = args.out or str(Path(tempfile.mkdtemp(prefix="tree-memory-")) / "tree.md")
    args.out = args.out or str(RESULTS / "tree_memory.md")
    if args.nodes < 1 or args.services < 0 or args.runs < 1 or args.settle < 0:
        parser.error("--nodes and --runs must be at least 1, --services and --settle not negative")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM and SIGHUP unwind like Ctrl-C, whatever this process inherited: the tree and
    # the simulators are stopped; a SIGKILL sends each of them SIGTERM (pyccm.lifetime).
    lifetime.stop_on_signals()
    # As the image runs it: two glibc heaps per process, bytecode compiled once.
    os.environ.setdefault("MALLOC_ARENA_MAX", "2")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    print("imports", flush=True)
    imports = measure_imports(args.runs)
    runs = []
    for index in range(args.runs):
        print(f"tree run {index + 1}/{args.runs}", flush=True)
        runs.append(
            tree_run(
                nodes=args.nodes,
                services=args.services,
                settle=args.settle,
                timeout=args.timeout or demo_timeout(args.nodes),
            )
        )
    command = "python -m bench.tree_memory " + " ".join(argv if argv is not None else sys.argv[1:])
    table = render(
        runs,
        imports,
        nodes=args.nodes,
        services=args.services,
        settle=args.settle,
        top=args.top,
        command=command.strip(),
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(table)
    print(table)
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
