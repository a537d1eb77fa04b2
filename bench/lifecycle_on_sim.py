"""One lifecycle monitor period over N NotReady nodes against the OpenStack simulator (not a
test: pytest does not collect it; timings belong in benchmarks,
docs/architecture.md#style-timings-in-bench).

Run: `.venv/bin/python -m bench.lifecycle_on_sim [nodes]
[latency_ms]` (defaults 5000, 20).

The simulator runs as its own process (`pyccm sim openstack`, N servers, the given latency),
so the CPU figure is the controller's and the provider's alone. Every node is NotReady (the
worst case: a mass kubelet outage; a Ready node costs no cloud call) and carries its server's
providerID, as an initialized node does. One period is what the runner does every
`--node-monitor-period`: the monitor periodic runs once, then 20 sync threads (the default
`--concurrent-node-probes`) sync every key it queued. It prints the Nova calls by kind, the
wall time and this process's CPU time.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from contextlib import ExitStack

from bench.provider_on_sim import admin, call_kinds, openstack_on_sim
from pyccm import lifetime
from pyccm.protocol.messages import Action, Topic
from pyccm.protocol.views import Node, NodeCondition, NodeSpec, NodeStatus, OwnerMeta
from pyccm.workers.lifecycle.controller import LifecycleController, LifecycleSettings
from pyccm.workers.runtime.replica import Replica

PROBES = 20


def not_ready(name: str, server_id: str) -> Node:
    return Node(
        metadata=OwnerMeta(name=name, uid=f"uid-{name}", resource_version="1"),
        spec=NodeSpec(provider_id=f"openstack:///{server_id}"),
        status=NodeStatus(conditions=(NodeCondition(type="Ready", status="Unknown"),)),
    )


def one_period(controller: LifecycleController) -> list[Action]:
    """The monitor once, then every key it queued synced by PROBES threads."""
    keys: queue.Queue[str | None] = queue.Queue()
    for periodic in controller.periodics(keys.put):
        if periodic.name == "monitor":
            periodic.run()
    actions: list[Action] = []
    lock = threading.Lock()

    def work() -> None:
        while (key := keys.get()) is not None:
            done = controller.sync(key)
            with lock:
                actions.extend(done)

    threads = [threading.Thread(target=work) for _ in range(PROBES)]
    for thread in threads:
        keys.put(None)
        thread.start()
    for thread in threads:
        thread.join()
    return actions


def run(nodes: int, latency_ms: float) -> None:
    with ExitStack() as stack:
        cloud, url = openstack_on_sim(
            stack, nodes=nodes, latency_ms=latency_ms, prefix="bench-life-"
        )
        instances = cloud.instances()
        assert instances is not None
        replica = Replica()
        for server in admin(url, "/resources/server")["items"]:
            node = not_ready(server["name"], server["id"])
            replica.apply(Topic.NODE, node.name, node)
        controller = LifecycleController(
            replica=replica, instances=instances, settings=LifecycleSettings(workers=PROBES)
        )
        mark = admin(url, "/calls?since=0")["next"]
        started, cpu = time.monotonic(), time.process_time()
        actions = one_period(controller)
        wall, cpu = time.monotonic() - started, time.process_time() - cpu
        kinds = call_kinds(url, mark, service="compute".__eq__)
        print(
            f"nodes {nodes} NotReady, latency {latency_ms:g} ms: one period in {wall:.2f} s wall,"
            f" {cpu:.2f} s CPU (this process), {len(actions)} actions"
        )
        print(f"Nova calls: {sum(kinds.values())}")
        for kind, count in kinds.most_common():
            print(f"  {count:6d}  {kind}")


def main() -> None:
    lifetime.stop_on_signals()  # SIGTERM, SIGHUP: the `with` stops the simulator
    nodes = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    latency = float(sys.argv[2]) if len(sys.argv) > 2 else 20.0
    run(nodes, latency)


if __name__ == "__main__":
    main()
