"""`pyccm demo`: pyccm's main job on the embedded default, end to end.

Starts the Kubernetes and OpenStack simulators as separate processes, seeds a cluster of
uninitialized nodes and a matching cloud, runs the real process tree under supervisord
(manager + node + lifecycle workers, the openstack provider, the bus over ipc), shows
progress, prints a summary table and exits 0 once every node is initialized (non-zero
with the reason on timeout). Everything lives in a temporary directory that is removed
afterwards unless `--keep` is given.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from protocol.views import Node

UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"
READY_URL = re.compile(r"ready at (\S+)")
REPO = Path(__file__).resolve().parent.parent


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
        "--timeout", type=float, default=120.0, help="seconds to converge (default 120)"
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
    parser.set_defaults(run=run)


@dataclass(frozen=True)
class World:
    workdir: Path
    kube_url: str
    kubeconfig: Path
    cloud_conf: Path


def run(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="pyccm-demo-"))
    with ExitStack() as stack:
        world = stack.enter_context(
            simulators(workdir, nodes=args.nodes, latency=args.cloud_latency_ms)
        )
        print(f"kube simulator  {world.kube_url}   kubeconfig {world.kubeconfig}")
        print(f"cloud config    {world.cloud_conf}")
        stack.enter_context(process_tree(world, node_syncs=args.concurrent_node_syncs))
        code = watch_progress(world, nodes=args.nodes, timeout=args.timeout)
        if code == 0 and args.keep:
            print(
                f"\nstill running; try: kubectl --kubeconfig {world.kubeconfig} get nodes -o wide"
            )
            print("Ctrl-C to stop")
            _wait_for_interrupt()
    if code == 0 and not args.keep:
        # Logs of a failed run stay for the reader.
        shutil.rmtree(workdir, ignore_errors=True)
    return code


@contextmanager
def simulators(
    workdir: Path,
    *,
    nodes: int,
    latency: float,
    servers: int | None = None,
    cloud_args: tuple[str, ...] = (),
) -> Iterator[World]:
    """Both simulators; the cloud has `servers` servers (default: one per node)."""
    kubeconfig = workdir / "kubeconfig"
    servers = nodes if servers is None else servers
    cloud_dir = workdir / "cloud"
    with ExitStack() as stack:
        kube_url = stack.enter_context(
            child(
                ["sim", "kube", "--seed-nodes", str(nodes), "--kubeconfig-out", str(kubeconfig)],
                workdir / "kube.log",
            )
        )
        stack.enter_context(
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
        )


@contextmanager
def child(arguments: list[str], log_path: Path) -> Iterator[str]:
    """A `pyccm` sub-command that prints one `ready at URL` line; yields the URL."""
    command = [sys.executable, "-m", "pyccm", *arguments]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, cwd=REPO)
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
            _stop(process)
            if process.stdout is not None:
                process.stdout.close()


@contextmanager
def process_tree(world: World, *, node_syncs: int = 10, kube_api_qps: int = 20) -> Iterator[None]:
    runtime = world.workdir / "run"
    metrics = runtime / "metrics"
    metrics.mkdir(parents=True, mode=0o700)
    env = dict(
        os.environ,
        PYCCM_BIN=str(Path(sys.executable).parent / "pyccm"),
        PYCCM_RUNTIME_DIR=str(runtime),
        PYCCM_KUBECONFIG=str(world.kubeconfig),
        PYCCM_CLOUD_CONFIG=str(world.cloud_conf),
        PYCCM_CLUSTER_NAME="demo",
        PYCCM_CONTROLLERS="cloud-node,cloud-node-lifecycle",
        PYCCM_MANAGER_ARGS="--secure-port=0 --leader-elect-retry-period=0.5 "
        f"--kube-api-qps={kube_api_qps} --kube-api-burst={int(kube_api_qps * 1.5)}",
        # A demo-sized cloud API budget: 10 sync threads at ~2 calls each need more than 20/s.
        PYCCM_WORKER_ARGS=f"--node-monitor-period=2 --concurrent-node-syncs={node_syncs} "
        "--cloud-api-qps=500 --cloud-api-burst=500",
        PROMETHEUS_MULTIPROC_DIR=str(metrics),
    )
    supervisord = Path(sys.executable).parent / "supervisord"
    with open(world.workdir / "tree.log", "wb") as log:
        process = subprocess.Popen(
            [str(supervisord), "-c", str(REPO / "supervisord.conf")],
            env=env,
            stdout=log,
            stderr=log,
            cwd=REPO,
        )
        try:
            yield
        finally:
            _stop(process, timeout=20)


def watch_progress(world: World, *, nodes: int, timeout: float) -> int:
    from kubeapi.client import KubeClient, KubeSettings
    from kubeapi.informer import NODES, Informer
    from manager.store import Cache
    from protocol.messages import SessionId

    client = KubeClient(settings=KubeSettings(kubeconfig=str(world.kubeconfig)))
    cache = Cache(session=SessionId("demo"), publish=lambda delta: None)
    reader = Informer(client=client, resource=NODES, sink=cache.nodes)
    deadline = time.monotonic() + timeout
    started = time.monotonic()
    done = 0
    while time.monotonic() < deadline:
        listed, _ = reader.list_all()
        done = sum(
            1 for node in listed if not node.has_taint(UNINITIALIZED) and node.spec.provider_id
        )
        print(f"\rnodes initialized: {done}/{nodes}", end="", flush=True)
        if done == nodes:
            print(f"  ({time.monotonic() - started:.1f}s)\n")
            print_summary(listed)
            return 0
        time.sleep(0.5)
    print(f"\nnot converged within {timeout:.0f}s: {done}/{nodes} nodes initialized")
    print(f"logs: {world.workdir} (kept)")
    return 1


def print_summary(nodes: list[Node]) -> None:
    rows = [("NODE", "PROVIDER ID", "TYPE", "ZONE", "ADDRESSES")]
    for node in sorted(nodes, key=lambda n: n.name):
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
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
            + "  "
            + row[-1]
        )


def _stop(process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_for_interrupt() -> None:
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return
