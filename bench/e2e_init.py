"""End-to-end initialization time: `python -m bench.e2e_init`.

N uninitialized nodes, a cloud whose every call takes `--latency-ms`, the real process
tree under supervisord; measured from the moment the tree starts until every Node has a
providerID and no uninitialized taint. Median of `--runs`; writes bench/results/e2e_init.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from pyccm import lifetime
from pyccm.kubeapi.client import KubeClient, KubeSettings
from pyccm.kubeapi.informer import NODES, Informer
from pyccm.manager.store import Cache
from pyccm.protocol.messages import SessionId
from pyccm_sim.demo import UNINITIALIZED, process_tree, simulators

RESULTS = Path(__file__).parent / "results"


def one_run(*, nodes: int, latency: float, syncs: int, qps: int, timeout: float) -> float:
    with ExitStack() as stack:
        world = stack.enter_context(
            simulators(Path(tempfile.mkdtemp()), nodes=nodes, latency=latency)
        )
        client = KubeClient(
            settings=KubeSettings(kubeconfig=str(world.kubeconfig), qps=100, burst=100)
        )
        reader = Informer(
            client=client,
            resource=NODES,
            sink=Cache(session=SessionId("b"), publish=lambda channel, delta: None).nodes,
        )
        started = time.perf_counter()
        stack.enter_context(process_tree(world, node_syncs=syncs, kube_api_qps=qps))
        while time.perf_counter() - started < timeout:
            listed, _ = reader.list_all()
            if all(not n.has_taint(UNINITIALIZED) and n.spec.provider_id for n in listed):
                return time.perf_counter() - started
            time.sleep(0.25)
    return float("inf")


def main() -> int:
    lifetime.stop_on_signals()  # SIGTERM, SIGHUP: the `with` blocks stop the tree and the sims
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--concurrent-node-syncs", type=int, default=20)
    # Each node costs 3 API writes (node patch, status patch, event): at upstream's 20 QPS
    # 1,000 nodes need 150 s whatever the controller does, so the budget is a parameter.
    parser.add_argument("--kube-api-qps", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    samples = [
        one_run(
            nodes=args.nodes,
            latency=args.latency_ms,
            syncs=args.concurrent_node_syncs,
            qps=args.kube_api_qps,
            timeout=args.timeout,
        )
        for _ in range(args.runs)
    ]
    median = statistics.median(samples)
    table = (
        "| measurement | result | target |\n| --- | --- | --- |\n"
        f"| {args.nodes} nodes initialized end to end, {args.latency_ms:.0f} ms per cloud call, "
        f"{args.concurrent_node_syncs} node sync threads, --kube-api-qps {args.kube_api_qps} "
        f"(median of {args.runs}; runs "
        f"{', '.join(f'{s:.1f}' for s in samples)} s) | **{median:.1f} s** | <= 30 s |\n"
    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "e2e_init.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
