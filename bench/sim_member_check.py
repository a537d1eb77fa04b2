"""The OpenStack simulator's check of member bodies, alone (`python -m bench.sim_member_check`).

A py-spy profile of the simulator under `pyccm demo --nodes 5000 --services 200` had it
busy 80 % of the run, more than half of that in checking the member bodies of batch
updates (every update names every node: a million bodies per round at 5,000 nodes and 200
pools). This times `Octavia.distinct_members` on `--pools` pools of `--nodes` members, each
pool's bodies distinct (their ports differ), `--rounds` times, and prints microseconds per
member (run it beside an older checkout with PYTHONPATH for a ratio in the same minute).
"""

from __future__ import annotations

import argparse
import time

from pyccm_sim.openstack.cloud import Cloud
from pyccm_sim.openstack.settings import SimSettings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pools", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    cloud = Cloud(settings=SimSettings())
    octavia = cloud.octavia
    subnet = next(iter(cloud.neutron.subnets.rows))  # the seeded node subnet
    pools = [
        [
            {
                "name": f"node-{i:05d}",
                "address": f"10.{i // 65536}.{(i // 256) % 256}.{i % 256}",
                "protocol_port": 30000 + pool,
                "subnet_id": subnet,
            }
            for i in range(args.nodes)
        ]
        for pool in range(args.pools)
    ]
    started = time.perf_counter()
    for _ in range(args.rounds):
        for bodies in pools:
            octavia.distinct_members(bodies)
    elapsed = time.perf_counter() - started
    members = args.rounds * args.pools * args.nodes
    print(f"{members} member bodies in {elapsed:.2f} s: {elapsed / members * 1e6:.2f} us each")


if __name__ == "__main__":
    main()
