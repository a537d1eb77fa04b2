"""Routing N nodes from nothing against the OpenStack simulator.

Run: `.venv/bin/python -m bench.routes_on_sim [nodes] [latency_ms]
[time_cap_s]` (defaults 5000, 20, 300).

The simulator runs as its own process (`pyccm sim openstack`, N servers, the given latency on
every call), so the CPU figure is the route controller's and the provider's alone. The
controller is the real one over the real OpenStack provider (`--cloud-api-qps` 500, as the
demo's tree), fed a replica of the N seeded nodes; reconciles run back to back (each waits out
the controller's one-second minimum interval) until the router holds every node's route and
every node's NetworkUnavailable condition is False, or the time cap passes. It prints the wall
time, this process's CPU time, the reconciles and the cloud calls by kind from the simulator's
call log; then the CPU and the calls of a steady reconcile (nothing to do).
"""

from __future__ import annotations

import statistics
import sys
import time
from contextlib import ExitStack

from bench.provider_on_sim import admin, call_kinds, openstack_on_sim
from pyccm import lifetime
from pyccm.protocol.messages import Action, PatchNodeStatus, RecordEvent, Topic
from pyccm.protocol.views import Node, NodeAddress, NodeSpec, NodeStatus, OwnerMeta
from pyccm.provider.errors import RetryAfter
from pyccm.workers.route.cidrs import parse_cluster_cidrs
from pyccm.workers.route.controller import KEY, RouteController, RouteSettings
from pyccm.workers.runtime.controller import SyncFailed
from pyccm.workers.runtime.replica import Replica
from pyccm_sim.scenario import CLUSTER_CIDR, seed_node


def not_identity(service: str) -> bool:
    return service != "identity"


def seeded(index: int) -> Node:
    seed = seed_node(index)
    return Node(
        metadata=OwnerMeta(name=seed.name, uid=f"uid-{seed.name}", resource_version="1"),
        spec=NodeSpec(pod_cidrs=(seed.pod_cidr,), pod_cidr=seed.pod_cidr),
        status=NodeStatus(addresses=(NodeAddress(type="InternalIP", address=seed.internal_ip),)),
    )


def routed(url: str) -> int:
    return sum(len(router.get("routes", [])) for router in admin(url, "/resources/router")["items"])


def settle(replica: Replica, actions: tuple[Action, ...]) -> int:
    """Write the conditions into the replica as the manager would; returns False ones."""
    for action in actions:
        if isinstance(action, PatchNodeStatus):
            node = replica.node(action.name)
            assert node is not None
            status = NodeStatus(addresses=node.status.addresses, conditions=action.conditions)
            replica.apply(Topic.NODE, node.name, Node(node.metadata, node.spec, status))
    return sum(
        1
        for node in replica.nodes()
        if (c := node.condition("NetworkUnavailable")) is not None and c.status == "False"
    )


def run(nodes: int, latency_ms: float, cap: float) -> None:
    with ExitStack() as stack:
        cloud, url = openstack_on_sim(
            stack, nodes=nodes, latency_ms=latency_ms, prefix="bench-routes-"
        )
        routes = cloud.routes()
        assert routes is not None
        replica = Replica()
        for index in range(nodes):
            node = seeded(index)
            replica.apply(Topic.NODE, node.name, node)
        controller = RouteController(
            replica=replica,
            routes=routes,
            settings=RouteSettings(cluster_cidrs=parse_cluster_cidrs(CLUSTER_CIDR)),
        )
        mark = admin(url, "/calls?since=0")["next"]
        started, cpu = time.monotonic(), time.process_time()
        reconciles, available, warnings = 0, 0, 0
        while available < nodes and time.monotonic() - started < cap:
            try:
                actions = controller.sync(KEY)
            except RetryAfter as wait:
                time.sleep(wait.delay)
                continue
            except SyncFailed as failed:
                actions = failed.actions
            reconciles += 1
            warnings += sum(1 for a in actions if isinstance(a, RecordEvent))
            available = settle(replica, actions)
        wall, cpu = time.monotonic() - started, time.process_time() - cpu
        kinds = call_kinds(url, mark, service=not_identity)
        print(
            f"nodes {nodes}, latency {latency_ms:g} ms: {routed(url)} routes on the router, "
            f"{available} nodes NetworkUnavailable=False, {warnings} warnings, "
            f"{reconciles} reconciles in {wall:.1f} s wall, {cpu:.2f} s CPU (this process)"
        )
        print(f"cloud calls: {sum(kinds.values())}")
        for kind, count in kinds.most_common():
            print(f"  {count:6d}  {kind}")
        steady(controller, url)


def steady(controller: RouteController, url: str, runs: int = 5) -> None:
    """Reconciles with nothing to do (each a second after the last): CPU and calls."""
    mark = admin(url, "/calls?since=0")["next"]
    cpus = []
    for _ in range(runs):
        time.sleep(1.0)  # the controller's minimum interval between reconciles
        cpu = time.process_time()
        actions = controller.sync(KEY)
        cpus.append(time.process_time() - cpu)
        assert actions == (), "a steady reconcile writes nothing"
    kinds = call_kinds(url, mark, service=not_identity)
    print(
        f"steady reconcile: median {statistics.median(cpus) * 1000:.0f} ms CPU over {runs},"
        f" cloud calls each: {', '.join(f'{n // runs} {k}' for k, n in kinds.items())}"
    )


def main() -> None:
    lifetime.stop_on_signals()  # SIGTERM, SIGHUP: the `with` stops the simulator
    nodes = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    latency = float(sys.argv[2]) if len(sys.argv) > 2 else 20.0
    cap = float(sys.argv[3]) if len(sys.argv) > 3 else 300.0
    run(nodes, latency, cap)


if __name__ == "__main__":
    main()
