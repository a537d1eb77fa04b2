"""The service controller's effects on seeded scenarios, written out so that two versions
of the code can be compared line by line (tests/support/service_trace.py draws and plays
the scenarios).

    python -m bench.service_trace --seeds 20 --out /tmp/new.jsonl
    (in a worktree of the older commit, with this file and the support module copied in)
    python -m bench.service_trace --seeds 20 --out /tmp/old.jsonl
    cmp /tmp/old.jsonl /tmp/new.jsonl

Each seed runs twice: on the fake cloud (whose calls are `method subject`) and on the real
OpenStack provider against the OpenStack simulator (whose calls are the simulator's access
log, `METHOD path` with query, Keystone left out). One JSON line per step: the step, the
keys synced in order with each sync's outcome and cloud calls, the writes committed to the
manager (typed messages) with how many cloud calls preceded each, made-up ids numbered by
first appearance.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import msgspec
from prometheus_client import CollectorRegistry

from pyccm.protocol.views import Node
from pyccm.provider.openstack import create_cloud
from pyccm.provider.settings import ProviderSettings
from pyccm_sim.openstack.testing import OpenStackSimHandle, running_openstack_sim
from tests.support.lb import nodes
from tests.support.service_trace import Cloud, fake_cloud, normalized, run, scenario
from tests.support.services import harness

# Octavia's PENDING_* lasts no time: each step's syncs converge without sleeping.
SIM_SEED: dict[str, Any] = {"seed_nodes": 8, "provisioning_delay_s": 0.0, "random_seed": 7}


def sim_cloud(sim: OpenStackSimHandle) -> Cloud:
    mark = [sim.mark()]

    def calls() -> list[tuple[str, str]]:
        new = [c for c in sim.calls(since=mark[0]) if c.service != "identity"]
        mark[0] = sim.mark()
        return [(c.method, c.path) for c in new]

    def fail(method: str) -> None:
        verbs = {
            "lb_ensure": ("POST",),
            "lb_update": ("PUT", "POST"),
            "lb_get": ("GET",),
            "lb_ensure_deleted": ("DELETE",),
        }
        sim.fail_next("load-balancer", 409, methods=verbs[method])

    def node(index: int, labels: dict[str, str]) -> Node:
        (found,) = nodes(1, start=index - 1, sim=sim)
        meta = msgspec.structs.replace(found.metadata, labels=labels)
        return msgspec.structs.replace(found, metadata=meta)

    return Cloud(
        calls=calls,
        fail_next=fail,
        provisioning=lambda: None,  # the simulator's delay is real time: left out
        elsewhere=lambda: None,
        node=node,
    )


@contextmanager
def on_simulator() -> Iterator[OpenStackSimHandle]:
    with ExitStack() as stack:
        sim = stack.enter_context(running_openstack_sim(**SIM_SEED))
        yield sim


def rows(seed: int, sim: OpenStackSimHandle, length: int) -> Iterator[str]:
    h = harness(nodes=0)
    for row in normalized(run(h, scenario(seed, length=length), fake_cloud(h))):
        yield json.dumps({"seed": seed, "cloud": "fake", **row}, sort_keys=True)
    sim.reset()
    sim.set_knobs(provisioning_delay_s=0.0)
    with tempfile.TemporaryDirectory(prefix="pyccm-trace-") as workdir:
        conf = Path(workdir) / "cloud.conf"
        conf.write_text(sim.cloud_conf_path.read_text())
        settings = ProviderSettings(cloud_config=conf, cloud_api_qps=1000.0, cloud_api_burst=1000)
        cloud = create_cloud(settings=settings, registry=CollectorRegistry(), environ={})
        try:
            lbs = cloud.load_balancers()
            assert lbs is not None
            h = harness(nodes=0, load_balancers=lbs)
            effects = run(h, scenario(seed, length=length), sim_cloud(sim))
        finally:
            cloud.close()
    for row in normalized(effects):
        yield json.dumps({"seed": seed, "cloud": "simulator", **row}, sort_keys=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds 0..N-1 (default 20)")
    parser.add_argument("--length", type=int, default=40, help="steps per seed (default 40)")
    parser.add_argument("--out", type=Path, required=True, help="the JSON lines file")
    args = parser.parse_args()
    with on_simulator() as sim, args.out.open("w") as out:
        for seed in range(args.seeds):
            for line in rows(seed, sim, args.length):
                out.write(line + "\n")
    print(f"{args.out}: {args.seeds} seeds")


if __name__ == "__main__":
    main()
