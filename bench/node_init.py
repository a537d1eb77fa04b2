"""When the nodes of a large cluster get initialized: `python -m bench.node_init`.

Both simulators (`--nodes` kubelet-registered, uninitialized Nodes and one server each,
`--latency-ms` per cloud call, no Service) and the real supervisord tree as `pyccm demo`
runs it. From the tree's start, the kube simulator's request log is read every 0.25 s:
the time of the first and of the last node initialization patch (`PATCH nodes/<name>`,
which removes the uninitialized taint), and when half of them had landed. Then the CPU
seconds of the node worker and of the manager (utime + stime from /proc), and the cloud
calls of the node worker's batch from the OpenStack simulator's log.

Times depend on the machine's load: run the commits to compare alternately, and state
the load (printed with each run). `PYTHONPATH=<worktree>:<worktree>/sim` runs another
checkout's code (the tree's processes inherit it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.faults import ADMIN_TOKEN
from bench.large_cluster import tree_processes
from pyccm_sim.demo import World, demo_kube_qps, process_tree, simulators

READS = ("/servers/detail", "/ports", "/flavors/3")


def admin(world: World, path: str) -> Any:
    request = urllib.request.Request(
        f"{world.kube_url}/_sim/{path}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.load(answer)


def cloud_calls(world: World) -> Counter[str]:
    request = urllib.request.Request(f"{world.cloud_url}/_sim/calls")
    with urllib.request.urlopen(request, timeout=60) as answer:
        calls: list[dict[str, Any]] = json.load(answer)["calls"]
    return Counter(
        f"{c.get('method', '?')} {str(c.get('path', '?')).split('?')[0]}"
        for c in calls
        if c.get("method") == "GET" and str(c.get("path", "")).split("?")[0].endswith(READS)
    )


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(nodes: int, latency_ms: float, timeout: float) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="pyccm-node-init-"))
    with simulators(workdir, nodes=nodes, latency=latency_ms) as world:
        mark = int(admin(world, "state")["requests"])
        with process_tree(world, node_syncs=20, kube_api_qps=demo_kube_qps(nodes)):
            started = time.monotonic()
            patched: list[float] = []
            while len(patched) < nodes and time.monotonic() - started < timeout:
                records = admin(world, f"requests?since={mark}")
                now = time.monotonic() - started
                for record in records:
                    mark = max(mark, int(record["seq"]) + 1)
                    if (
                        record.get("verb") == "patch"
                        and record.get("resource") == "nodes"
                        and not record.get("subresource")
                    ):
                        patched.append(now)
                time.sleep(0.25)
            pids = tree_processes(world)
            cpu = {role: cpu_seconds(pids[role]) for role in ("cloud-node", "manager")}
        calls = cloud_calls(world)
    shutil.rmtree(workdir, ignore_errors=True)
    return {
        "patched": len(patched),
        "first_s": patched[0] if patched else None,
        "half_s": patched[len(patched) // 2] if patched else None,
        "last_s": patched[-1] if patched else None,
        "cpu_s": cpu,
        "cloud_calls": dict(calls),
        "load": os.getloadavg(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.nodes, args.latency_ms, args.timeout), indent=1), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
