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

A second section measures capacity: a simulator seeded with a 5,000-node cloud (5,000
servers and their ports, 200 load balancers each with a listener, a pool of 5,000 members
and, on every other one, a monitor: 1,000,000 members; a router with 5,000 routes) reports
its seed time and RSS, and the latency of the calls a CCM makes at that size next to the
same calls on a small cloud (1,000 servers, one load balancer of 5,000 members, a router
without routes), each the median of `--reps` sequential calls. A call that costs the same
at both sizes does not grow with unrelated objects. `--quick` runs a smaller version of
everything and writes to a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
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

from pyccm import lifetime
from pyccm_sim.scenario import node_internal_ip, node_pod_cidr

RESULTS = Path(__file__).parent / "results"
READY_PREFIX = "pyccm sim openstack: ready at "
TARGET_GETS_PER_S = 1000.0
TARGET_RSS_MIB = 500


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


def start_simulator(config_dir: Path, nodes: int, *extra: str) -> tuple[subprocess.Popen[str], str]:
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
        *extra,
    ]
    process = lifetime.spawn(command, stdout=subprocess.PIPE, text=True)
    _pin(0, pid=process.pid)
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line.startswith(READY_PREFIX):
        lifetime.stop(process)
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


def rss_mib(pid: int, field: str = "VmRSS:") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
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


# --- capacity: a 5,000-node cloud ------------------------------------------------------------

LB_PATH = "/load-balancer/v2/lbaas"
# Routes to add (and remove again) per latency sample, as a burst of node joins would.
ROUTE_BURST = 100
# Membership change per batch update sample: the batch alternates between two sets that
# differ by this many members, so every call deletes and creates that many.
MEMBER_CHURN = 100


@dataclass(frozen=True)
class CloudSize:
    servers: int
    lbs: int
    members: int
    routes: int


@dataclass(frozen=True)
class Capacity:
    size: CloudSize
    # Seeding steps and their wall time (s).
    seed_s: dict[str, float]
    rss_mib: float
    peak_rss_mib: float
    # Call name -> latency of each sample (ms): client wall time, and the simulator's own
    # (its call log: request in to answer out, without the network or the client).
    latency_ms: dict[str, list[float]]
    sim_ms: dict[str, list[float]]


def _members(first: int, count: int, subnet_id: str) -> list[dict[str, Any]]:
    return [
        {
            "name": f"node-{i:04d}",
            "address": node_internal_ip(i),
            "protocol_port": 30080,
            "subnet_id": subnet_id,
        }
        for i in range(first, first + count)
    ]


def _big_lb(serial: int, size: CloudSize, subnet_id: str) -> dict[str, Any]:
    body = lb_body(subnet_id, serial)
    pool = body["loadbalancer"]["listeners"][0]["default_pool"]
    pool["members"] = _members(0, size.members, subnet_id)
    if serial % 2:
        del pool["healthmonitor"]
    return body


def _routes(first: int, count: int) -> list[dict[str, str]]:
    """Pod routes of nodes first..first+count-1, as pyccm writes them."""
    return [
        {"destination": node_pod_cidr(i), "nexthop": node_internal_ip(i)}
        for i in range(first, first + count)
    ]


def _burst(sample: int) -> list[dict[str, str]]:
    """ROUTE_BURST routes the seeded router does not hold (11.x.y.0/24, one set per sample)."""
    first = sample * ROUTE_BURST
    return [
        {
            "destination": f"11.{i // 256 % 256}.{i % 256}.0/24",
            "nexthop": node_internal_ip(i % 5000),
        }
        for i in range(first, first + ROUTE_BURST)
    ]


class Cloud:
    """One seeded simulator, driven through its HTTP API by one aiohttp session."""

    def __init__(self, session: aiohttp.ClientSession, url: str, token: str, ids: Any) -> None:
        self.session = session
        self.url = url
        self.headers = {"X-Auth-Token": token}
        self.ids = ids
        self.lb_names: list[str] = []
        self.pool_ids: list[str] = []

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        async with self.session.request(
            method, self.url + path, headers=self.headers, json=body
        ) as answer:
            return answer.status, await answer.read()

    async def ok(self, method: str, path: str, body: Any = None) -> bytes:
        """The answer's bytes (a failed call aborts the benchmark); decoding them is the
        client's cost, not the simulator's, so timed calls never do."""
        status, raw = await self.call(method, path, body)
        if status >= 300:
            raise RuntimeError(f"{method} {path}: HTTP {status}: {raw[:300]!r}")
        return raw

    async def seed(self, size: CloudSize) -> dict[str, float]:
        subnet = self.ids["private_subnet_id"]
        started = time.perf_counter()
        for serial in range(size.lbs):
            created = await self.ok(
                "POST", f"{LB_PATH}/loadbalancers", _big_lb(serial, size, subnet)
            )
            lb = json.loads(created)["loadbalancer"]
            self.lb_names.append(lb["name"])
            self.pool_ids.append(lb["listeners"][0]["default_pool_id"])
        lbs = time.perf_counter() - started
        started = time.perf_counter()
        router = f"/network/v2.0/routers/{self.ids['router_id']}"
        for first in range(0, size.routes, 1000):
            batch = _routes(first, min(1000, size.routes - first))
            await self.ok("PUT", f"{router}/add_extraroutes", {"router": {"routes": batch}})
        return {"load balancers": lbs, "routes": time.perf_counter() - started}

    def calls(self, size: CloudSize) -> dict[str, Callable[[int], Coroutine[Any, Any, Any]]]:
        """The measured calls; each takes its sample number."""
        middle = size.lbs // 2
        lb_name, pool_id = self.lb_names[middle], self.pool_ids[middle]
        subnet = self.ids["private_subnet_id"]
        router = f"/network/v2.0/routers/{self.ids['router_id']}"
        node = size.servers // 2
        members = f"{LB_PATH}/pools/{pool_id}/members"

        def get(path: str) -> Callable[[int], Coroutine[Any, Any, Any]]:
            return lambda _: self.ok("GET", path)

        async def batch(sample: int) -> Any:
            first = MEMBER_CHURN * (sample % 2)
            body = {"members": _members(first, size.members, subnet)}
            return await self.ok("PUT", members, body)

        async def add_routes(sample: int) -> Any:
            burst = {"router": {"routes": _burst(sample)}}
            return await self.ok("PUT", f"{router}/add_extraroutes", burst)

        async def remove_routes(sample: int) -> Any:
            burst = {"router": {"routes": _burst(sample)}}
            return await self.ok("PUT", f"{router}/remove_extraroutes", burst)

        return {
            "GET load balancers?name= (Octavia)": get(f"{LB_PATH}/loadbalancers?name={lb_name}"),
            "GET one pool's members, first page (Octavia)": get(members),
            f"PUT batch update of a pool's {size.members:,} members, "
            f"{MEMBER_CHURN} replaced (Octavia)": batch,
            f"PUT add_extraroutes, {ROUTE_BURST} routes (Neutron)": add_routes,
            f"PUT remove_extraroutes, {ROUTE_BURST} routes (Neutron)": remove_routes,
            "GET ports?fixed_ips=ip_address= (Neutron)": get(
                f"/network/v2.0/ports?fixed_ips=ip_address%3D{node_internal_ip(node)}"
            ),
            "GET servers?name=^node$ (Nova)": get(
                f"/compute/v2.1/servers?name=%5Enode-{node:04d}%24"
            ),
            "GET servers/detail, first page (Nova)": get("/compute/v2.1/servers/detail"),
        }


async def measure_capacity(url: str, config_dir: Path, size: CloudSize, reps: int) -> Capacity:
    """Seed `size` into the simulator at `url`, then time each call `reps` times."""
    ids = json.loads((config_dir / "openstack-sim.json").read_text())
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        target = await prepare(session, url)
        await _admin(url, "POST", "/_sim/reset", {"knobs": False})
        cloud = Cloud(session, url, target.token, ids)
        seed_s = await cloud.seed(size)
        latency: dict[str, list[float]] = {}
        # Calls are sequential and the admin API is not logged, so the k-th call below is
        # call log entry `first + k`.
        first = (await _admin(url, "GET", "/_sim/calls?since=1000000000000"))["next"]
        names = []
        calls = cloud.calls(size)
        for sample in range(-1, reps):  # sample -1 warms up
            for name, call in calls.items():
                started = time.perf_counter()
                await call(sample + 1)
                names.append(name if sample >= 0 else "")
                if sample >= 0:
                    latency.setdefault(name, []).append((time.perf_counter() - started) * 1e3)
        logged = (await _admin(url, "GET", f"/_sim/calls?since={first}"))["calls"]
        inventory = (await _admin(url, "GET", "/_sim/counters"))["inventory"]
    if inventory["member"] != size.lbs * size.members:
        raise RuntimeError(f"expected {size.lbs * size.members} members, found {inventory}")
    sim_ms: dict[str, list[float]] = {}
    for entry in logged:
        name = names[entry["seq"] - first]
        if name:
            sim_ms.setdefault(name, []).append(float(entry["latency_ms"]))
    return Capacity(size, seed_s, 0.0, 0.0, latency, sim_ms)


def run_capacity(size: CloudSize, reps: int) -> Capacity:
    """A fresh simulator of `size`: its start-up, seeding, memory and call latencies."""
    with tempfile.TemporaryDirectory(prefix="pyccm-bench-cap-") as config_dir:
        started = time.perf_counter()
        process, url = start_simulator(
            Path(config_dir),
            size.servers,
            "--provisioning-delay",
            "0",
            # A 5,000-member create is ~0.5 MB: an operator of such a cloud raises the limit.
            "--max-request-body-size",
            "0",
        )
        boot = time.perf_counter() - started
        try:
            result = asyncio.run(measure_capacity(url, Path(config_dir), size, reps))
            rss, peak = rss_mib(process.pid), rss_mib(process.pid, "VmHWM:")
        finally:
            lifetime.stop(process, timeout=60)
            if process.stdout is not None:
                process.stdout.close()
    seed = {f"start with {size.servers:,} servers and their ports": boot, **result.seed_s}
    return Capacity(size, seed, rss, peak, result.latency_ms, result.sim_ms)


# --- the 1,000-Service benchmark's load ------------------------------------------------------

SERVICE_LOAD_TARGET = 500.0


@dataclass(frozen=True)
class ServiceLoad:
    load_balancers: int
    concurrency: int
    latency_ms: float
    seconds: float
    rate: float
    client_ms: list[float]
    sim_ms: list[float]
    # The simulator's CPU time over the wall time of the loaded window (1.0 = one core).
    sim_cpu: float
    # The machine's 1-minute load average at the end of the window.
    load_average: float


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure_service_load(
    url: str, pid: int, *, lbs: int, seconds: float, concurrency: int, latency_ms: float
) -> ServiceLoad:
    """`lbs` load balancers, then `concurrency` reads in flight for `seconds`, each call
    delayed by `latency_ms` as the service benchmark's cloud is."""
    async with aiohttp.ClientSession() as session:
        target = await prepare(session, url)
        await _admin(url, "POST", "/_sim/reset", {"knobs": False})
        headers = {"X-Auth-Token": target.token}
        made = []
        for serial in range(lbs):
            async with session.post(
                f"{url}{LB_PATH}/loadbalancers",
                headers=headers,
                json=lb_body(target.subnet_id, serial),
            ) as answer:
                made.append((await answer.json())["loadbalancer"])
    await _admin(url, "PATCH", "/_sim/knobs", {"latency_ms": latency_ms})
    # What a Service's no-op sync reads: its LB by name, by id, its listeners, its FIP.
    paths = [
        path
        for lb in made
        for path in (
            f"{LB_PATH}/loadbalancers?name={lb['name']}",
            f"{LB_PATH}/loadbalancers/{lb['id']}",
            f"{LB_PATH}/listeners?loadbalancer_id={lb['id']}",
            f"/network/v2.0/floatingips?port_id={lb['vip_port_id']}",
        )
    ]
    client_ms: list[float] = []

    async def read(session: aiohttp.ClientSession, serial: int) -> int:
        started = time.perf_counter()
        async with session.get(url + paths[serial % len(paths)], headers=headers) as answer:
            await answer.read()
        client_ms.append((time.perf_counter() - started) * 1e3)
        return answer.status

    first = (await _admin(url, "GET", "/_sim/calls?since=1000000000000"))["next"]
    cpu, started = cpu_seconds(pid), time.perf_counter()
    achieved = await rate(read, seconds=seconds, concurrency=concurrency)
    share = (cpu_seconds(pid) - cpu) / (time.perf_counter() - started)
    logged = (await _admin(url, "GET", f"/_sim/calls?since={first}"))["calls"]
    sim_ms = [float(call["latency_ms"]) for call in logged]
    return ServiceLoad(
        lbs,
        concurrency,
        latency_ms,
        seconds,
        achieved,
        client_ms,
        sim_ms,
        share,
        os.getloadavg()[0],
    )


def run_service_load(args: argparse.Namespace) -> ServiceLoad:
    with tempfile.TemporaryDirectory(prefix="pyccm-bench-load-") as config_dir:
        process, url = start_simulator(Path(config_dir), 10)
        try:
            return asyncio.run(
                measure_service_load(
                    url,
                    process.pid,
                    lbs=args.load_lbs,
                    seconds=args.load_seconds,
                    concurrency=args.load_concurrency,
                    latency_ms=args.load_latency_ms,
                )
            )
        finally:
            lifetime.stop(process, timeout=60)
            if process.stdout is not None:
                process.stdout.close()


def _median_p90(samples: list[float]) -> str:
    if len(samples) < 2:
        return "n/a"
    return f"{statistics.median(samples):.1f} / {statistics.quantiles(samples, n=10)[-1]:.1f}"


def service_load_section(load: ServiceLoad, *, args: argparse.Namespace) -> list[str]:
    # What one core of simulator would answer at this cost per call: the client process
    # (or a busy machine) may be what held the achieved rate down.
    per_core = load.rate / load.sim_cpu if load.sim_cpu > 0 else float("inf")
    verdict = "met" if per_core >= SERVICE_LOAD_TARGET else "missed"
    flags = " --quick" if args.quick else ""
    return [
        "## Under the 1,000-Service benchmark's load",
        "",
        f"`python -m bench.openstack_sim{flags}` (this section: `--load-lbs "
        f"{load.load_balancers} --load-concurrency {load.concurrency} --load-latency-ms "
        f"{load.latency_ms:g} --load-seconds {load.seconds:g}`)",
        "",
        f"{load.load_balancers:,} load balancers (fully populated, 3 members, a monitor), every "
        f"call delayed {load.latency_ms:g} ms (the `--latency-ms` of `bench.service_scale`), "
        f"{load.concurrency} calls in flight (its 50 syncs) for {load.seconds:g} s from one "
        "client process, cycling through the reads of a Service's sync: its load balancer "
        "by name and by id, its listeners, its VIP's floating IP.",
        "",
        "| calls/s | client latency median / p90 (ms) | simulator latency median / p90 (ms) "
        "| simulator CPU (share of one core) | calls/s per core of simulator |",
        "|---:|---:|---:|---:|---:|",
        f"| {load.rate:,.0f} | {_median_p90(load.client_ms)} | {_median_p90(load.sim_ms)} "
        f"| {load.sim_cpu:.0%} | {per_core:,.0f} |",
        "",
        f"Target: the ~{SERVICE_LOAD_TARGET:,.0f} calls/s that 1,000 Services converging in "
        f"15 s at 50 syncs need, within one core of simulator: {verdict}. The simulator "
        "latency includes the injected delay; what exceeds it is time waiting for a CPU "
        f"(load average {load.load_average:.1f} on {os.cpu_count()} CPUs as it ended). "
        "The achieved rate is what one client process drove on this machine.",
        "",
    ]


def write_results(
    results: list[Measurement],
    *,
    args: argparse.Namespace,
    rss: float,
    load_balancers: int,
    capacity: tuple[Capacity, Capacity] | None,
    load: ServiceLoad | None = None,
) -> None:
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
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
            f"Python {platform.python_version()}; load average when the run ended "
            f"{os.getloadavg()[0]:.1f} (the machine is shared, so rates vary between runs).",
            "",
            f"![requests per second]({out.name}.png)",
            "",
            *(service_load_section(load, args=args) if load else []),
            *(capacity_section(*capacity, args=args) if capacity else []),
        ]
    )
    out.with_suffix(".md").write_text(text)
    plot(results, out.with_suffix(".png"))


def capacity_section(small: Capacity, large: Capacity, *, args: argparse.Namespace) -> list[str]:
    size = large.size
    flags = " --quick" if args.quick else ""
    seed_rows = [f"| {step} | {seconds:,.1f} |" for step, seconds in large.seed_s.items()]
    call_rows = []
    for name, samples in large.sim_ms.items():
        low, high = min(small.sim_ms[name]), min(samples)
        before, after = statistics.median(small.sim_ms[name]), statistics.median(samples)
        wall = statistics.median(large.latency_ms[name])
        call_rows.append(
            f"| {name} | {low:,.2f} / {before:,.2f} | {high:,.2f} / {after:,.2f} "
            f"| **{high / low:.2f}** | {after / before:.2f} | {wall:,.2f} |"
        )
    verdict = "met" if large.rss_mib <= TARGET_RSS_MIB else "missed"
    return [
        f"## Capacity: a {size.servers:,}-node cloud in one simulator",
        "",
        f"`python -m bench.openstack_sim{flags} --reps {args.reps}` (this section)",
        "",
        f"Seeded through the API: {size.servers:,} servers with their ports; {size.lbs:,} load "
        f"balancers, each a listener, a pool of {size.members:,} members (every other one with "
        f"a monitor), so {size.lbs * size.members:,} members; a router holding "
        f"{size.routes:,} routes. Octavia provisions at once (`--provisioning-delay 0`) and "
        "the body limit is off (`--max-request-body-size 0`), as an operator of such a cloud "
        "would raise it.",
        "",
        "| seeding step | seconds |",
        "|---|---:|",
        *seed_rows,
        "",
        f"Simulator RSS after seeding and the calls below: **{large.rss_mib:,.0f} MiB** "
        f"(peak {large.peak_rss_mib:,.0f} MiB); target ≤ {TARGET_RSS_MIB} MiB: {verdict}.",
        "",
        f"Latency of single calls ({args.reps} samples each, one at a time) on a small cloud "
        f"({small.size.servers:,} servers, {small.size.lbs} load balancer of "
        f"{small.size.members:,} members, a router without routes) and on the cloud above. "
        "Each call's own work is the same on both (the same pool size, a full page of "
        "servers); a ratio near 1 means its cost does not grow with unrelated objects. The "
        "route calls answer the whole router, whose routes are the only part that grows. "
        "*Simulator*: the time the simulator's call log records (request in to answer "
        "out), minimum / median of the samples; on a shared machine the minimum is the "
        "steadier estimate of a call's cost, so the ratio is of minima (of medians beside "
        "it). *Client*: median wall time in this process until the whole answer was read "
        "(not decoded), which adds the transfer of larger answers.",
        "",
        f"| call | simulator, small: min / median (ms) | simulator, {size.servers:,} nodes: "
        "min / median (ms) | ratio (min) | ratio (median) | client, "
        f"{size.servers:,} nodes (ms) |",
        "|---|---:|---:|---:|---:|---:|",
        *call_rows,
        "",
    ]


def plot(results: list[Measurement], path: Path) -> None:
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
    figure.savefig(path, dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--reps", type=int, default=11, help="samples per capacity call")
    parser.add_argument("--no-capacity", action="store_true", help="skip the capacity section")
    parser.add_argument("--no-load", action="store_true", help="skip the service-load section")
    parser.add_argument("--load-lbs", type=int, default=1000)
    parser.add_argument("--load-concurrency", type=int, default=50)
    parser.add_argument("--load-latency-ms", type=float, default=20.0)
    parser.add_argument("--load-seconds", type=float, default=10.0)
    parser.add_argument("--quick", action="store_true", help="everything smaller, to a temp dir")
    parser.add_argument("--out", default="", help="output path without suffix")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    lifetime.stop_on_signals()  # a SIGTERM or SIGHUP unwinds the `finally` that stops the sim
    large, small = CloudSize(5000, 200, 5000, 5000), CloudSize(1000, 1, 5000, 0)
    if args.quick:
        args.runs, args.seconds, args.reps = 1, 1.0, 3
        args.load_lbs, args.load_seconds = 100, 3.0
        large, small = CloudSize(1000, 20, 1000, 1000), CloudSize(200, 1, 1000, 0)
        args.out = args.out or str(
            Path(tempfile.mkdtemp(prefix="openstack-sim-")) / "openstack_sim"
        )
    args.out = args.out or str(RESULTS / "openstack_sim")
    _pin(1)
    with tempfile.TemporaryDirectory(prefix="pyccm-bench-os-") as config_dir:
        process, url = start_simulator(Path(config_dir), args.nodes)
        try:
            results, load_balancers = asyncio.run(
                measure(url, runs=args.runs, seconds=args.seconds, concurrency=args.concurrency)
            )
            rss = rss_mib(process.pid)
        finally:
            lifetime.stop(process, timeout=30)
            if process.stdout is not None:
                process.stdout.close()
    for measurement in results:
        runs = ", ".join(f"{r:,.0f}" for r in measurement.runs)
        print(f"{measurement.name}: median {measurement.median:,.0f}/s (runs: {runs})")
    load = None
    if not args.no_load:
        load = run_service_load(args)
        for line in service_load_section(load, args=args):
            print(line)
    capacity = None
    if not args.no_capacity:
        capacity = (run_capacity(small, args.reps), run_capacity(large, args.reps))
        for line in capacity_section(*capacity, args=args):
            print(line)
    if not args.no_write:
        write_results(
            results,
            args=args,
            rss=rss,
            load_balancers=load_balancers,
            capacity=capacity,
            load=load,
        )
        print(f"written: {args.out}.md and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
