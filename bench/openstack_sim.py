"""How much load the OpenStack simulator absorbs on one core (`python -m bench.openstack_sim`).

The simulator must never be what limits a CCM benchmark, so this measures it alone:
`pyccm sim openstack` runs as a subprocess pinned to one CPU, and this process (pinned to
another CPU when there is one) is the load generator, an aiohttp client that reuses one
session and one Keystone token, with a fixed number of requests in flight:

- GET /compute/v2.1/servers/{id}                 (a node lookup by providerID)
- GET /load-balancer/v2/lbaas/loadbalancers/{id} (the CCM's wait-for-ACTIVE poll)
- POST /load-balancer/v2/lbaas/loadbalancers     (fully populated: listener, pool, 3 members,
                                                  monitor; a VIP port created in Neutron)

Each measurement runs for `--seconds` and is repeated `--runs` times; the table reports
the median (and min/max) and is written with a plot to bench/results/openstack_sim.{md,png}.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

RESULTS = Path(__file__).parent / "results"
READY_PREFIX = "pyccm sim openstack: ready at "
TARGET_GETS_PER_S = 1000.0


@dataclass(frozen=True)
class Measurement:
    name: str
    runs: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.runs)


@dataclass(frozen=True)
class Target:
    url: str
    token: str
    server_id: str
    lb_id: str
    subnet_id: str


def _pin(cpu: int, *, pid: int = 0) -> None:
    """Pin a process (0: this one) to one CPU, when the OS allows and the CPU exists."""
    if hasattr(os, "sched_setaffinity") and cpu < (os.cpu_count() or 1):
        os.sched_setaffinity(pid, {cpu})


def start_simulator(config_dir: Path, nodes: int) -> tuple[subprocess.Popen[str], str]:
    command = [
        sys.executable,
        "-m",
        "pyccm.cli",
        "sim",
        "openstack",
        "--port",
        "0",
        "--seed-nodes",
        str(nodes),
        "--write-config",
        str(config_dir),
        "--provisioning-delay",
        "0.05",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    _pin(0, pid=process.pid)
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line.startswith(READY_PREFIX):
        process.kill()
        raise RuntimeError(f"simulator did not start: {line!r}")
    return process, line.removeprefix(READY_PREFIX).split(" ")[0]


async def prepare(session: aiohttp.ClientSession, url: str) -> Target:
    auth = {
        "auth": {
            "identity": {
                "methods": ["password"],
                "password": {
                    "user": {
                        "name": "pyccm",
                        "domain": {"name": "Default"},
                        "password": "pyccm-sim-secret",
                    }
                },
            },
            "scope": {"project": {"name": "pyccm", "domain": {"name": "Default"}}},
        }
    }
    async with session.post(f"{url}/identity/v3/auth/tokens", json=auth) as answer:
        token = answer.headers["X-Subject-Token"]
    headers = {"X-Auth-Token": token}
    async with session.get(f"{url}/compute/v2.1/servers", headers=headers) as answer:
        server_id = (await answer.json())["servers"][0]["id"]
    async with session.get(
        f"{url}/network/v2.0/subnets?name=private-subnet", headers=headers
    ) as answer:
        subnet_id = (await answer.json())["subnets"][0]["id"]
    async with session.post(
        f"{url}/load-balancer/v2/lbaas/loadbalancers", headers=headers, json=lb_body(subnet_id, 0)
    ) as answer:
        lb_id = (await answer.json())["loadbalancer"]["id"]
    return Target(url=url, token=token, server_id=server_id, lb_id=lb_id, subnet_id=subnet_id)


def lb_body(subnet_id: str, serial: int) -> dict[str, Any]:
    name = f"kube_service_kubernetes_bench_svc{serial}"
    members = [
        {
            "name": f"node-{i:04d}",
            "address": f"10.0.0.{10 + i}",
            "protocol_port": 30080,
            "subnet_id": subnet_id,
        }
        for i in range(3)
    ]
    pool = {
        "name": f"pool_0_{name}",
        "protocol": "TCP",
        "lb_algorithm": "ROUND_ROBIN",
        "members": members,
        "healthmonitor": {"type": "TCP", "delay": 5, "timeout": 3, "max_retries": 1},
    }
    listener = {
        "name": f"listener_0_{name}",
        "protocol": "TCP",
        "protocol_port": 80,
        "tags": [name],
        "default_pool": pool,
    }
    return {
        "loadbalancer": {
            "name": name,
            "vip_subnet_id": subnet_id,
            "tags": [name],
            "listeners": [listener],
        }
    }


Request = Callable[[aiohttp.ClientSession, int], Coroutine[Any, Any, int]]


async def rate(request: Request, *, seconds: float, concurrency: int) -> float:
    """Completed requests per second with `concurrency` in flight; non-2xx answers abort."""
    done = 0
    serial = 0
    deadline = time.perf_counter() + seconds
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal done, serial
            while time.perf_counter() < deadline:
                serial += 1
                status = await request(session, serial)
                if status >= 300:
                    raise RuntimeError(f"benchmark request failed with HTTP {status}")
                done += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return done / (time.perf_counter() - started)


def requests_for(target: Target) -> dict[str, Request]:
    headers = {"X-Auth-Token": target.token}

    async def get_server(session: aiohttp.ClientSession, _: int) -> int:
        async with session.get(
            f"{target.url}/compute/v2.1/servers/{target.server_id}", headers=headers
        ) as r:
            await r.read()
            return r.status

    async def get_lb(session: aiohttp.ClientSession, _: int) -> int:
        path = f"{target.url}/load-balancer/v2/lbaas/loadbalancers/{target.lb_id}"
        async with session.get(path, headers=headers) as r:
            await r.read()
            return r.status

    async def create_lb(session: aiohttp.ClientSession, serial: int) -> int:
        path = f"{target.url}/load-balancer/v2/lbaas/loadbalancers"
        async with session.post(path, headers=headers, json=lb_body(target.subnet_id, serial)) as r:
            await r.read()
            return r.status

    return {
        "GET server (Nova)": get_server,
        "GET load balancer (Octavia)": get_lb,
        "POST load balancer, fully populated (Octavia)": create_lb,
    }


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def measure(
    url: str, *, runs: int, seconds: float, concurrency: int
) -> tuple[list[Measurement], int]:
    """The measurements, and how many load balancers the simulator holds at the end."""
    async with aiohttp.ClientSession() as session:
        target = await prepare(session, url)
    results = []
    for name, request in requests_for(target).items():
        samples = []
        for _ in range(runs):
            if name.startswith("POST"):
                # Start each create run from the seeded cloud, so VIP addresses never run out.
                await _admin(url, "POST", "/_sim/reset", {"knobs": False})
            samples.append(await rate(request, seconds=seconds, concurrency=concurrency))
        results.append(Measurement(name, samples))
    counters = await _admin(url, "GET", "/_sim/counters")
    return results, int(counters["inventory"]["loadbalancer"])


async def _admin(url: str, method: str, path: str, body: Any = None) -> Any:
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, url + path, json=body) as r,
    ):
        return await r.json()


def write_results(
    results: list[Measurement], *, args: argparse.Namespace, rss: float, load_balancers: int
) -> None:
    RESULTS.mkdir(exist_ok=True)
    rows = [
        f"| {m.name} | {m.median:,.0f} | {min(m.runs):,.0f} | {max(m.runs):,.0f} |" for m in results
    ]
    gets = [m.median for m in results if m.name.startswith("GET")]
    verdict = "meets" if min(gets) >= TARGET_GETS_PER_S else "misses"
    text = "\n".join(
        [
            "# OpenStack simulator capacity",
            "",
            f"`python -m bench.openstack_sim --runs {args.runs} --seconds {args.seconds} "
            f"--concurrency {args.concurrency} --nodes {args.nodes}`",
            "",
            f"Simulator pinned to one CPU; load generator (aiohttp, one session and one token, "
            f"{args.concurrency} requests in flight) in another process. {args.runs} runs of "
            f"{args.seconds:g} s each per row; requests per second.",
            "",
            "| request | median/s | min/s | max/s |",
            "|---|---:|---:|---:|",
            *rows,
            "",
            f"Target ≥ {TARGET_GETS_PER_S:,.0f} GETs/s: the slowest GET median {verdict} it "
            f"({min(gets):,.0f}/s).",
            f"Simulator RSS at the end ({args.nodes} servers seeded, {load_balancers:,} load "
            f"balancers with 3 members each, from the last create run): {rss:,.0f} MiB.",
            "",
            f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, "
            f"Python {platform.python_version()}.",
            "",
            "![requests per second](openstack_sim.png)",
            "",
        ]
    )
    (RESULTS / "openstack_sim.md").write_text(text)
    plot(results)


def plot(results: list[Measurement]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 3.5))
    names = [m.name for m in results]
    axis.barh(names, [m.median for m in results], color="#4c72b0")
    for index, measurement in enumerate(results):
        axis.scatter(
            measurement.runs, [index] * len(measurement.runs), color="black", s=10, zorder=3
        )
    axis.axvline(TARGET_GETS_PER_S, color="#c44e52", linestyle="--", label="GET target")
    axis.set_xlabel("requests per second (median bar, runs as dots)")
    axis.invert_yaxis()
    axis.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(RESULTS / "openstack_sim.png", dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    _pin(1)
    with tempfile.TemporaryDirectory(prefix="pyccm-bench-os-") as config_dir:
        process, url = start_simulator(Path(config_dir), args.nodes)
        try:
            results, load_balancers = asyncio.run(
                measure(url, runs=args.runs, seconds=args.seconds, concurrency=args.concurrency)
            )
            rss = rss_mib(process.pid)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
            if process.stdout is not None:
                process.stdout.close()
    for measurement in results:
        runs = ", ".join(f"{r:,.0f}" for r in measurement.runs)
        print(f"{measurement.name}: median {measurement.median:,.0f}/s (runs: {runs})")
    if not args.no_write:
        write_results(results, args=args, rss=rss, load_balancers=load_balancers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
