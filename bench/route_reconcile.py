"""Time of one route reconcile. Run: `.venv/bin/python -m bench.route_reconcile [runs]`.
It prints the median of several runs as a markdown table.

Scenarios, against the in-memory FakeCloud:
* first: N nodes with a pod CIDR each and an empty router: N creates and N condition patches;
* steady: the same nodes, routed and with their conditions written: one list and the plan only;
* slow cloud: first reconcile of 1,000 nodes when every batch call takes 20 ms: the 1,000
  creates are one `create_many` (one call per node would be 20 s serial).
"""

from __future__ import annotations

import ipaddress
import statistics
import sys
import time
from collections.abc import Callable

from pyccm.protocol.messages import Action
from pyccm_sim.fake_provider import FakeCloud
from tests.support.routes import Harness, build, make_node

POD_BASE = ipaddress.IPv4Address("10.244.0.0")
NODE_BASE = ipaddress.IPv4Address("172.16.0.0")


def populated(count: int, *, create_delay: float = 0.0) -> Harness:
    cloud = FakeCloud()
    if create_delay:
        cloud.set_delay("routes_create_many", create_delay)
    harness = build(cloud)
    for index in range(count):
        # A /30 each inside the cluster's 10.244.0.0/16 (room for 16,384 nodes).
        cidr = f"{POD_BASE + 4 * index}/30"
        harness.put(make_node(f"n{index}", cidrs=(cidr,), ips=(str(NODE_BASE + index + 1),)))
    return harness


def timed(harness: Harness) -> tuple[float, tuple[Action, ...]]:
    started = time.perf_counter()
    actions = harness.reconcile()
    return time.perf_counter() - started, actions


def first(count: int, create_delay: float = 0.0) -> float:
    return timed(populated(count, create_delay=create_delay))[0]


def steady(count: int) -> float:
    harness = populated(count)
    _, actions = timed(harness)
    for node in harness.replica.nodes():
        harness.settle(node, actions)
    seconds, again = timed(harness)
    assert again == (), "a steady reconcile must write nothing"
    return seconds


def median(runs: int, measure: Callable[..., float], *args: float) -> float:
    return statistics.median(measure(*args) for _ in range(runs))


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    print(f"| scenario | nodes | median of {runs} (s) |")
    print("| --- | ---: | ---: |")
    for count in (1_000, 5_000):
        print(f"| first reconcile | {count:,} | {median(runs, first, count):.3f} |")
        print(f"| steady reconcile | {count:,} | {median(runs, steady, count):.3f} |")
    slow = median(max(1, runs // 2), first, 1_000, 0.02)
    print(f"| first reconcile, 20 ms per batch call | 1,000 | {slow:.3f} |")


if __name__ == "__main__":
    main()
