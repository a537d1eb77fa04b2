"""What a load balancer's members cost the service worker: kept, and allocated while syncing.

Run: `.venv/bin/python -m bench.member_memory [nodes] [services] [body-limit] [--pss]
[--as-is]` (defaults 2000, 20, the simulator's own request body limit: oslo.middleware's
114,688 bytes, so the members go in parts; `4194304`, as `bench.large_cluster`, sends each
pool's in its create).

One OpenStack simulator process with `nodes` servers; in this process, the OpenStack
provider ensures `services` load balancers at once (one thread each, as the service worker's
sync threads do), every node a member of every pool, until each is done. Python's
allocations are traced (tracemalloc) from just before the first ensure: it prints the peak
and what is still allocated after a `gc.collect()`, per member. The tree's service worker
keeps much of its peak (Python's arenas are not returned once fragmented, nor malloc's once
several threads used them): `--pss` runs without tracemalloc (whose own records would
count) and prints how much this process's PSS grew over the ensures instead, the part of
the peak it kept (`bench/results/lean_tree.md`). Like the service worker, it first fixes
malloc's mmap threshold (`pyccm/workers/service/memory.py`); `--as-is` leaves it.
"""

from __future__ import annotations

import gc
import json
import sys
import threading
import time
import tracemalloc
import urllib.request
from contextlib import ExitStack

from bench.provider_on_sim import openstack_on_sim
from bench.service_scale import _baseline_nodes, _baseline_service
from pyccm import lifetime
from pyccm.protocol.views import Node, Service
from pyccm.provider.errors import RetryAfter
from pyccm.provider.interface import LoadBalancers
from pyccm.workers.service.memory import return_large_buffers

POLL = 0.5
POLLS = 600


def ensure_until_done(lbs: LoadBalancers, service: Service, nodes: tuple[Node, ...]) -> None:
    for _ in range(POLLS):
        try:
            lbs.ensure(service=service, nodes=nodes)
            return
        except RetryAfter:
            time.sleep(POLL)
    raise SystemExit(f"{service.key} was not done after {POLLS} polls")


def pss_mib() -> float:
    """This process's PSS (smaps_rollup): what it holds, Python's allocator and malloc's
    arenas included, which tracemalloc does not see."""
    with open("/proc/self/smaps_rollup") as rollup:
        for line in rollup:
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    return 0.0


def set_body_limit(url: str, limit: int) -> None:
    body = json.dumps({"max_request_body_size": limit}).encode()
    request = urllib.request.Request(f"{url}/_sim/knobs", data=body, method="PATCH")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=60):
        pass


def main(argv: list[str]) -> int:
    flags = {arg for arg in argv if arg.startswith("--")}
    traced = "--pss" not in flags
    argv = [arg for arg in argv if arg not in flags]
    count = int(argv[0]) if argv else 2000
    services = int(argv[1]) if len(argv) > 1 else 20
    lifetime.stop_on_signals()  # SIGTERM, SIGHUP: the `with` stops the simulator
    with ExitStack() as stack:
        cloud, url = openstack_on_sim(stack, nodes=count, latency_ms=0, prefix="pyccm-members-")
        if len(argv) > 2:
            set_body_limit(url, int(argv[2]))
        lbs = cloud.load_balancers()
        assert lbs is not None
        nodes = _baseline_nodes(count)
        wanted = [_baseline_service(i) for i in range(services)]
        if "--as-is" not in flags:
            return_large_buffers()  # as the service worker does
        gc.collect()
        pss_before = pss_mib()
        if traced:
            tracemalloc.start()
        threads = [
            threading.Thread(target=ensure_until_done, args=(lbs, service, nodes))
            for service in wanted
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        gc.collect()
        grown = pss_mib() - pss_before
        if traced:
            _, peak = tracemalloc.get_traced_memory()
            kept, _ = tracemalloc.get_traced_memory()
            tracemalloc.stop()
    members = count * services
    if not traced:
        print(
            f"{services} load balancers x {count} members ({members} members), ensured at "
            f"once: this process's PSS grew {grown:.1f} MiB ({grown * 2**20 / members:.0f} B "
            "per member)"
        )
        return 0
    print(
        f"{services} load balancers x {count} members ({members} members), ensured at once: "
        f"peak {peak / 2**20:.1f} MiB ({peak / members:.0f} B per member), "
        f"kept {kept / 2**20:.1f} MiB ({kept / members:.0f} B per member)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
