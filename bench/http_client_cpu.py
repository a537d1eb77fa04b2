"""CPU per cloud call of the provider's HTTP client, against the OpenStack simulator.

Run: `.venv/bin/python -m bench.http_client_cpu [calls] [rounds]` (defaults 1000, 7).

The simulator runs as its own process with no added latency, so `time.process_time()` of
this process is the client's CPU alone: `OpenStackClient.call` → keystoneauth → requests →
urllib3, one `GET /flavors` after another on one thread. Each round measures the client as
pyccm builds it, then the same client with requests' `trust_env` off (requests then skips
its per-request scan of the environment for proxies, `NO_PROXY` and a CA bundle), so the
two are compared in the same process, alternating. It prints the median CPU per call of
each and their ratio.
"""

from __future__ import annotations

import statistics
import sys
import time
from contextlib import ExitStack

from bench.provider_on_sim import openstack_on_sim
from pyccm import lifetime
from pyccm.provider.openstack.client import OpenStackClient


def cpu_per_call_ms(client: OpenStackClient, calls: int) -> float:
    started = time.process_time()
    for _ in range(calls):
        client.call("compute", "GET", "/flavors", request="bench")
    return (time.process_time() - started) / calls * 1000


def main(argv: list[str]) -> int:
    calls = int(argv[0]) if argv else 1000
    rounds = int(argv[1]) if len(argv) > 1 else 7
    lifetime.stop_on_signals()  # SIGTERM, SIGHUP: the `with` stops the simulator
    with ExitStack() as stack:
        cloud, _ = openstack_on_sim(stack, nodes=1, latency_ms=0, prefix="pyccm-http-cpu-")
        client = cloud.client
        http = client.connection.session.session
        cpu_per_call_ms(client, 200)  # token, discovery, connection pool: not measured
        measured: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(rounds):
            for trust_env in (True, False):
                http.trust_env = trust_env
                measured[trust_env].append(cpu_per_call_ms(client, calls))
        http.trust_env = True
    print(f"{calls} GETs x {rounds} rounds, CPU per call (ms):")
    for trust_env, values in measured.items():
        shown = ", ".join(f"{v:.3f}" for v in values)
        print(f"  trust_env={trust_env}: median {statistics.median(values):.3f} ({shown})")
    ratio = statistics.median(measured[False]) / statistics.median(measured[True])
    print(f"  without the environment scan / as built: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
