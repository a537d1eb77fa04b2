"""The manager's memory per node, by part: `python -m bench.manager_parts`.

In one process, without the tree: the manager's cache (`pyccm.manager.store.Cache`, every
view's channels) is filled with `--nodes` Nodes as the kube simulator serves them
(`pyccm_sim.kube.seed.node_object`, plus what the API server adds: uid, resourceVersion,
creationTimestamp), in the state the node worker leaves them (the uninitialized taint
gone, a providerID, the instance-type, zone and region labels), decoded from one JSON
list as the informer decodes a page (`msgspec`, into `protocol.views.Node`). Each delta
is encoded as the bus encodes it and dropped (no worker is connected). A second table is
each worker's replica (`workers.runtime.replica.Replica`) of its view's projection of the
same Nodes, decoded from one msgpack frame as a snapshot arrives.

tracemalloc (one frame) then counts what is still allocated, grouped by the function
whose line allocated it, at two sizes; the difference divided by the difference in nodes
is each part's bytes per node. Python's own overhead (freed blocks kept by pymalloc,
fragmentation) is not in tracemalloc's count: compare the total with PSS per node from
`bench.tree_memory`.

Prints a Markdown table (`--out FILE` writes it too).
"""

from __future__ import annotations

import argparse
import ast
import gc
import linecache
import tracemalloc
from collections import Counter
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import msgspec

from pyccm.protocol.messages import ENCODER, Delta, SessionId, Topic, encode
from pyccm.protocol.projections import VIEWS, project
from pyccm.protocol.views import Node
from pyccm.workers.runtime.replica import Replica
from pyccm_sim.kube.seed import UNINITIALIZED_TAINT, node_object

REPO = Path(__file__).resolve().parent.parent


def initialized(index: int) -> dict[str, Any]:
    """Node `index` as the API serves it once the node worker initialized it."""
    obj = node_object(index, clock=1_700_000_000.0)
    meta = obj["metadata"]
    meta |= {
        "uid": f"00000000-0000-4000-8000-{index:012d}",
        "resourceVersion": str(100_000 + index),
        "creationTimestamp": "2026-11-28T00:00:00Z",
        "managedFields": [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1"}],
    }
    meta["labels"] |= {
        "node.kubernetes.io/instance-type": "m1.large",
        "beta.kubernetes.io/instance-type": "m1.large",
        "topology.kubernetes.io/zone": "nova",
        "failure-domain.beta.kubernetes.io/zone": "nova",
        "topology.kubernetes.io/region": "RegionOne",
        "failure-domain.beta.kubernetes.io/region": "RegionOne",
    }
    spec = obj["spec"]
    spec["providerID"] = f"openstack:///{index:08d}-0000-4000-8000-000000000000"
    spec["taints"] = [t for t in spec["taints"] if t["key"] != UNINITIALIZED_TAINT]
    return obj


@cache
def functions_of(filename: str) -> list[tuple[int, int, str]]:
    """(first line, last line, name) of every function in a source file."""
    try:
        tree = ast.parse(Path(filename).read_text())
    except (OSError, SyntaxError, ValueError):
        return []
    return [
        (node.lineno, node.end_lineno or node.lineno, node.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def part_of(filename: str, lineno: int) -> str:
    """`module:function` of the line that allocated (the innermost function)."""
    inside = [(last - first, name) for first, last, name in functions_of(filename)]
    inside = [
        (span, name)
        for (span, name), (first, last, _) in zip(inside, functions_of(filename), strict=True)
        if first <= lineno <= last
    ]
    function = min(inside)[1] if inside else "<module>"
    path = Path(filename)
    try:
        shown = str(path.relative_to(REPO))
    except ValueError:
        shown = "/".join(path.parts[-2:])
    return f"{shown}:{function}"


def fill(count: int) -> tuple[Any, dict[str, int]]:
    """A manager cache holding `count` initialized Nodes; what tracemalloc counts by part
    (bytes), with the transient list and deltas gone."""
    from pyccm.manager.store import Cache

    body = msgspec.json.encode([initialized(i) for i in range(count)])
    gc.collect()
    tracemalloc.start(1)

    def publish(channel: str, delta: Delta) -> None:
        encode(delta)

    cache_ = Cache(session=SessionId("bench"), publish=publish)
    nodes = msgspec.json.decode(body, type=list[Node])
    cache_.nodes.replace(nodes)
    cache_.services.replace([])
    del nodes
    gc.collect()
    snapshot = tracemalloc.take_snapshot()
    tracemalloc.stop()
    parts: Counter[str] = Counter()
    for stat in snapshot.statistics("lineno"):
        frame = stat.traceback[0]
        parts[part_of(frame.filename, frame.lineno)] += stat.size
    linecache.clearcache()
    return cache_, dict(parts)


def table(small: int, large: int) -> list[str]:
    kept_small, at_small = fill(small)
    del kept_small
    gc.collect()
    kept_large, at_large = fill(large)
    del kept_large
    per_node = {
        part: (at_large.get(part, 0) - at_small.get(part, 0)) / (large - small)
        for part in set(at_small) | set(at_large)
    }
    rows = sorted(per_node.items(), key=lambda item: -item[1])
    lines = [
        f"| part (allocating function) | {small:,} nodes (KiB) | {large:,} nodes (KiB) "
        "| bytes per node |",
        "| --- | ---: | ---: | ---: |",
    ]
    for part, bytes_per_node in rows:
        if abs(bytes_per_node) < 8:
            continue
        lines.append(
            f"| `{part}` | {at_small.get(part, 0) / 1024:,.0f} | "
            f"{at_large.get(part, 0) / 1024:,.0f} | {bytes_per_node:,.0f} |"
        )
    total_small, total_large = sum(at_small.values()), sum(at_large.values())
    lines.append(
        f"| **total** | {total_small / 1024:,.0f} | {total_large / 1024:,.0f} | "
        f"**{(total_large - total_small) / (large - small):,.0f}** |"
    )
    return lines


def replica_bytes(view_name: str, count: int) -> int:
    """What tracemalloc counts of a worker's replica of `count` Nodes in view `view_name`,
    decoded from one msgpack frame of the projections, as the bus carries a snapshot."""
    view = VIEWS[view_name]
    full = msgspec.json.decode(msgspec.json.encode([initialized(i) for i in range(count)]))
    nodes = msgspec.convert(full, list[Node])
    frame = ENCODER.encode([project(view, Topic.NODE, node) for node in nodes])
    del full, nodes
    gc.collect()
    tracemalloc.start(1)
    replica = Replica()
    for node in msgspec.msgpack.decode(frame, type=list[Node]):
        replica.apply(Topic.NODE, node.name, node)
    gc.collect()
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return size


def replica_table(small: int, large: int) -> list[str]:
    lines = [
        f"| worker's replica (view) | {small:,} nodes (KiB) | {large:,} nodes (KiB) "
        "| bytes per node |",
        "| --- | ---: | ---: | ---: |",
    ]
    for view_name in VIEWS:
        at_small, at_large = (replica_bytes(view_name, n) for n in (small, large))
        lines.append(
            f"| {view_name} | {at_small / 1024:,.0f} | {at_large / 1024:,.0f} | "
            f"{(at_large - at_small) / (large - small):,.0f} |"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="2000,5000", help="two sizes (default 2000,5000)")
    parser.add_argument("--out", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    small, large = (int(n) for n in args.nodes.split(","))
    lines = [*table(small, large), "", *replica_table(small, large)]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
