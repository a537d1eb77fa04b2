"""What a cloud-config reload costs a worker (docs/features.md#reload-cloudconf-without-a-restart).

    .venv/bin/python -m bench.cloud_config_reload [--rounds N]

Against an OpenStack simulator process, on the real provider: the time of one
`reload_config()` that finds the file unchanged (what every poll costs, every 10 s by
default), of one that applies a `[LoadBalancer]` change, and of one that applies a rotated
password (a new Connection) followed by the first call on it (Keystone authentication and
Nova's version discovery included). Medians and maxima over `--rounds`, in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import urllib.request
from collections.abc import Callable
from contextlib import ExitStack

from bench.provider_on_sim import openstack_on_sim
from pyccm import lifetime
from pyccm.protocol.views import Node, NodeSpec, OwnerMeta


def _admin(url: str, method: str, path: str, body: object) -> None:
    request = urllib.request.Request(
        f"{url.rstrip('/')}/_sim{path}",
        data=json.dumps(body).encode(),
        method=method,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10):
        pass


def _timed(action: Callable[[], object], rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    lifetime.stop_on_signals()  # SIGTERM, SIGHUP: the `with` stops the simulator
    with ExitStack() as stack:
        cloud, url = openstack_on_sim(stack, nodes=1, latency_ms=0, prefix="pyccm-bench-reload-")
        path = cloud.settings.path
        base = path.read_text()
        cloud.reload_config()  # the first look always parses
        instances = cloud.instances()
        assert instances is not None
        node = Node(metadata=OwnerMeta(name="node-0000", uid="u"), spec=NodeSpec())
        instances.instance_exists(node=node)
        methods = iter(["SOURCE_IP", "ROUND_ROBIN"] * args.rounds)

        def lb_change() -> None:
            path.write_text(base + f"\n[LoadBalancer]\nlb-method = {next(methods)}\n")
            assert cloud.reload_config() is not None

        seeded = cloud.settings.global_.password
        passwords = iter([f"{seeded}-rotated", seeded] * args.rounds)

        def rotation() -> None:
            # Keystone takes the new password first (old tokens stay valid), then the file.
            password = next(passwords)
            _admin(url, "PATCH", "/knobs", {"keystone_password": password})
            path.write_text(base.replace(f"password = {seeded}", f"password = {password}"))
            change = cloud.reload_config()
            assert change is not None
            assert change.sections == ("Global",)
            instances.instance_exists(node=node)

        rows = [
            ("unchanged file (one poll)", _timed(cloud.reload_config, args.rounds * 20)),
            ("[LoadBalancer] change applied", _timed(lb_change, args.rounds)),
            (
                "new password applied + first call (Keystone, discovery)",
                _timed(rotation, args.rounds),
            ),
        ]
    print(f"{'what':56} {'median ms':>10} {'max ms':>10} {'n':>6}")
    for what, times in rows:
        print(f"{what:56} {statistics.median(times):10.3f} {max(times):10.3f} {len(times):6d}")


if __name__ == "__main__":
    main()
