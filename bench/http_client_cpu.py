"""CPU per cloud call of the provider's HTTP client, against the OpenStack simulator.

Run: `.venv/bin/python -m bench.http_client_cpu [calls] [rounds]` (defaults 1000, 7).

The simulator runs as its own process with no added latency, so `time.process_time()` of
this process is the client's CPU alone, one `GET /flavors` after another on one thread.
Each round measures, alternating in the same process:

* the client as pyccm builds it: `OpenStackClient.call` (throttle, metrics, retries, error
  mapping) on urllib3 directly (`provider/openstack/connection.py`);
* the baseline: the same GET through a keystoneauth `Adapter` (the stack every call took
  until the lean tree: keystoneauth → requests → urllib3) with the same credentials, without
  pyccm's layer on top, so the ratio understates the gain.

It prints the median CPU per call of each and their ratio.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack

from keystoneauth1 import adapter, session
from keystoneauth1.identity import v3

from bench.provider_on_sim import openstack_on_sim
from pyccm import lifetime
from pyccm.provider.openstack.transport.connection import auth_method


def cpu_per_call_ms(call: Callable[[], object], calls: int) -> float:
    started = time.process_time()
    for _ in range(calls):
        call()
    return (time.process_time() - started) / calls * 1000


def main(argv: list[str]) -> int:
    calls = int(argv[0]) if argv else 1000
    rounds = int(argv[1]) if len(argv) > 1 else 7
    lifetime.stop_on_signals()  # SIGTERM, SIGHUP: the `with` stops the simulator
    with ExitStack() as stack:
        cloud, _ = openstack_on_sim(stack, nodes=1, latency_ms=0, prefix="pyccm-http-cpu-")
        client = cloud.client
        g = cloud.settings.global_
        _, options = auth_method(g)
        nova = adapter.Adapter(
            session.Session(auth=v3.Password(auth_url=g.auth_url, **options)),  # type: ignore[arg-type]
            service_type="compute",
            interface="public",
        )

        def pyccm_call() -> object:
            return client.call("compute", "GET", "/flavors", request="bench")

        def keystoneauth_call() -> object:
            answer = nova.get("/flavors")
            assert answer.status_code == 200
            return answer.content

        ways = {"pyccm (urllib3)": pyccm_call, "keystoneauth Adapter": keystoneauth_call}
        for call in ways.values():
            cpu_per_call_ms(call, 200)  # token, discovery, connection pool: not measured
        measured: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(rounds):
            for name, call in ways.items():
                measured[name].append(cpu_per_call_ms(call, calls))
    print(f"{calls} GETs x {rounds} rounds, CPU per call (ms):")
    for name, values in measured.items():
        shown = ", ".join(f"{v:.3f}" for v in values)
        print(f"  {name}: median {statistics.median(values):.3f} ({shown})")
    ratio = statistics.median(measured["pyccm (urllib3)"]) / statistics.median(
        measured["keystoneauth Adapter"]
    )
    print(f"  pyccm / keystoneauth Adapter: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
