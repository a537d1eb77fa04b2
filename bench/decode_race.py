"""Concurrent first decodes into new msgspec types: `python -m bench.decode_race [RUNS]`.

Why `protocol/decoding.py` exists. Each run is a fresh process whose 48 threads decode, all
at once, pages of the OpenStack provider's own types (listeners, pools, members, load
balancers) that no thread has decoded into before, while collecting garbage — what a
worker's sync threads do in their first seconds. `raw` calls `msgspec.json.decode(...,
type=...)` as pyccm did; `pyccm` goes through `protocol.decoding.decode_json`. Prints how
many runs of each died (a SIGSEGV in msgspec 0.22 for `raw`). The crash needs thread
switches at the wrong moment: measured with the machine busy (load 6-13) it hit 3 of 450
raw runs and 0 of 400 locked ones; on a quiet machine 0 of 300 of either.
"""

from __future__ import annotations

import subprocess
import sys

from pyccm import lifetime

CHILD = r"""
import gc, json, sys, threading
import msgspec
from pyccm.protocol.decoding import decode_json
from pyccm.provider.openstack import client
from pyccm.provider.openstack.loadbalancer.resources import Listener, LoadBalancer, Member, Pool

gc.freeze()
row = {"id": "1", "name": "x", "protocol": "TCP", "protocol_port": 80,
       "provisioning_status": "ACTIVE", "operating_status": "ONLINE",
       "loadbalancers": [{"id": "a"}], "address": "10.0.0.1", "listeners": [], "pools": [],
       "members": [], "vip_address": "1.2.3.4", "vip_port_id": "p", "tags": []}
pages = [
    (client._page_of(key, item), json.dumps({key: [row] * 30, key + "_links": []}).encode())
    for key, item in (("listeners", Listener), ("pools", Pool), ("members", Member),
                      ("loadbalancers", LoadBalancer))
]
raw = sys.argv[1] == "raw"
barrier = threading.Barrier(48)

def go(n):
    barrier.wait()
    for kind, body in pages[n % 4:] + pages[: n % 4]:
        try:
            msgspec.json.decode(body, type=kind) if raw else decode_json(body, kind)
        except msgspec.ValidationError:
            pass
        gc.collect(0)

threads = [threading.Thread(target=go, args=(i,)) for i in range(48)]
for t in threads: t.start()
for t in threads: t.join()
"""


def died(mode: str, runs: int) -> int:
    return sum(
        subprocess.run(
            [sys.executable, "-c", CHILD, mode], check=False, capture_output=True, **lifetime.tied()
        ).returncode
        != 0
        for _ in range(runs)
    )


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    for mode in ("raw", "pyccm"):
        print(f"{mode}: {died(mode, runs)} of {runs} runs died", flush=True)


if __name__ == "__main__":
    main()
