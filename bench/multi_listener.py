"""A Service of many ports on the real Octavia: how long until its load balancer is ACTIVE
and converged, and how many calls that takes, for pyccm and for upstream's algorithm.

Two moments, on the conformance stack (real Keystone, Neutron, Octavia and Nova from
`~/.cache/pyccm-conformance`, `tests/conformance/realcloud.py`; Octavia's noop driver, whose
objects a settler moves from PENDING_* to ACTIVE after `--settle` seconds, standing for the
amphora's provisioning time):

* **create**: a new Service with `--ports` TCP ports on `--nodes` nodes;
* **node joins**: one more node, so every one of the Service's pools gains a member: the
  reconcile upstream users find slow with many listeners (kubernetes/cloud-provider-openstack#2858).

pyccm: its provider (`OctaviaLoadBalancers.ensure` / `.update`), called again after each
`RetryAfter` delay as the worker's queue would, until it returns. Upstream's algorithm,
re-implemented from its code (calls and waits, not its Go): the create is one fully
populated POST, then `GET` the load balancer until ACTIVE, its listeners, the VIP port's
floating IPs, a floating-IP POST; a node joining is, per port in order, the pool listing,
the pool's members and one batch member PUT, each write followed by `GET` the load
balancer until ACTIVE, polled at once and then after 1 s, 1.2 s, 1.44 s ... (its
`wait.ExponentialBackoff`, factor 1.2). Calls are counted in the services' access logs
(Keystone left out).

    python -m bench.multi_listener                  # 10 ports, 3 nodes, settle 0.5 s and 3 s
    python -m bench.multi_listener --settle 0.5 --out /tmp/multi_listener.md
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry

from pyccm.protocol.views import Node, Service
from pyccm.provider.errors import RetryAfter
from pyccm.provider.interface import LoadBalancers
from pyccm.provider.openstack import create_cloud
from pyccm.provider.settings import ProviderSettings
from pyccm_sim.scenario import seed_node
from tests.conformance.realcloud import RealCloud, release, running_real_cloud
from tests.support.lb import nodes, service, with_annotations

RESULTS = Path(__file__).parent / "results" / "multi_listener.md"
CLUSTER = "bench"
DEADLINE = 900.0
T = TypeVar("T")


@dataclass(frozen=True)
class Measured:
    settle: float
    algorithm: str
    moment: str
    seconds: float
    calls: int
    writes: int
    lb_gets: int
    detail: str


def until_done(call: Callable[[], T]) -> tuple[T, int]:
    """`call` again after each RetryAfter's delay, as the worker's queue would; the result
    and how many syncs it took."""
    deadline = time.monotonic() + DEADLINE
    syncs = 0
    while True:
        syncs += 1
        try:
            return call(), syncs
        except RetryAfter as retry:
            if time.monotonic() > deadline:
                raise
            time.sleep(retry.delay)


def pyccm_lbs(cloud: RealCloud, workdir: Path) -> LoadBalancers:
    path = workdir / "pyccm-cloud.conf"
    path.write_text(cloud.cloud_conf_path.read_text())
    settings = ProviderSettings(
        cloud_config=path, cluster_name=CLUSTER, cloud_api_qps=1000.0, cloud_api_burst=1000
    )
    found = create_cloud(settings=settings, registry=CollectorRegistry(), environ={})
    lbs = found.load_balancers()
    assert lbs is not None
    return lbs


def ten_ports(count: int) -> tuple[tuple[int, int, str], ...]:
    return tuple((8000 + i, 30800 + i, "TCP") for i in range(count))


def measure(
    cloud: RealCloud,
    settle: float,
    algorithm: str,
    moment: str,
    run: Callable[[], str],
    *,
    lb: str,
) -> Measured:
    """Time `run` until the load balancer named `lb` is ACTIVE (an observer's reads, not
    counted, see it: pyccm's last write returns before Octavia is done with it), and count
    the calls `run` made."""
    mark = cloud.mark()
    started = time.monotonic()
    detail = run()
    calls = [c for c in cloud.calls(mark) if c.service != "keystone"]
    wait_active(cloud, lb)
    seconds = time.monotonic() - started
    writes = [c for c in calls if c.method in {"POST", "PUT", "PATCH", "DELETE"}]
    lb_gets = sum(
        1
        for c in calls
        if c.method == "GET" and c.path.rstrip("/").split("/")[-2:-1] == ["loadbalancers"]
    )
    return Measured(settle, algorithm, moment, seconds, len(calls), len(writes), lb_gets, detail)


def lb_name(service_name: str) -> str:
    return f"kube_service_{CLUSTER}_default_{service_name}"


def wait_active(cloud: RealCloud, name: str) -> None:
    lb_api = cloud.connection("admin").load_balancer
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        found = list(lb_api.load_balancers(name=name))
        if found and all(lb.provisioning_status == "ACTIVE" for lb in found):
            return
        time.sleep(0.05)
    raise AssertionError(f"{name} never ACTIVE")


def run_pyccm(
    cloud: RealCloud, workdir: Path, settle: float, ports: int, node_count: int
) -> list[Measured]:
    lbs = pyccm_lbs(cloud, workdir)
    svc = service("pyccm-many", ports=ten_ports(ports))
    # Warm: the token, Octavia's version document, the networks (none of them measured).
    lbs.get(service=service("warm-up", ports=ten_ports(1)))
    before, after = nodes(node_count), nodes(node_count + 1)
    kept: dict[str, Service] = {}

    def create() -> str:
        outcome, syncs = until_done(lambda: lbs.ensure(service=svc, nodes=before))
        kept["svc"] = with_annotations(svc, dict(outcome.annotations_to_set))
        return f"{syncs} syncs"

    def join() -> str:
        _, syncs = until_done(lambda: lbs.update(service=kept["svc"], nodes=after))
        return f"{syncs} syncs"

    name = lb_name(svc.name)
    rows = [measure(cloud, settle, "pyccm", "create", create, lb=name)]
    rows.append(measure(cloud, settle, "pyccm", "node joins", join, lb=name))
    check_members(cloud, kept["svc"].name, ports, node_count + 1)
    return rows


class Upstream:
    """Upstream's calls and waits, on raw REST through openstacksdk's adapters."""

    def __init__(self, cloud: RealCloud) -> None:
        self._cloud = cloud
        conn = cloud.connection("ccm")
        self._lb = conn.load_balancer
        self._net = conn.network
        self.polls = 0

    def _json(self, response: Any, expect: int) -> Any:
        assert response.status_code == expect, (response.status_code, response.text[:300])
        return response.json() if response.content else None

    def warm(self) -> None:
        """The token and the endpoints (not measured)."""
        self._json(self._lb.get("/lbaas/loadbalancers", params={"name": "warm-up"}), 200)
        self._json(self._net.get("/floatingips", params={"port_id": "warm-up"}), 200)

    def wait_active(self, lb_id: str) -> None:
        """`GET` the load balancer at once, then after 1 s, 1.2 s, 1.44 s ... until ACTIVE."""
        delay, deadline = 1.0, time.monotonic() + DEADLINE
        while True:
            self.polls += 1
            lb = self._json(self._lb.get(f"/lbaas/loadbalancers/{lb_id}"), 200)["loadbalancer"]
            if lb["provisioning_status"] == "ACTIVE":
                return
            assert lb["provisioning_status"] != "ERROR", lb
            assert time.monotonic() < deadline, "never ACTIVE"
            time.sleep(delay)
            delay *= 1.2

    def create(self, name: str, ports: int, members: list[Node]) -> str:
        lb_full = lb_name(name)
        listeners = [
            {
                "name": f"listener_{i}_{lb_full}",
                "protocol": "TCP",
                "protocol_port": port,
                "tags": [lb_full],
                "default_pool": {
                    "name": f"pool_{i}_{lb_full}",
                    "protocol": "TCP",
                    "lb_algorithm": "ROUND_ROBIN",
                    "members": member_bodies(members, node_port),
                },
            }
            for i, (port, node_port, _) in enumerate(ten_ports(ports))
        ]
        body = {
            "loadbalancer": {
                "name": lb_full,
                "description": f"Kubernetes external service default/{name} from cluster {CLUSTER}",
                "vip_subnet_id": self._cloud.seeded.subnet_id,
                "tags": [lb_full],
                "listeners": listeners,
            }
        }
        self._json(self._lb.get("/lbaas/loadbalancers", params={"name": lb_full}), 200)
        lb = self._json(self._lb.post("/lbaas/loadbalancers", json=body), 201)["loadbalancer"]
        self.wait_active(lb["id"])
        self._json(self._lb.get("/lbaas/listeners", params={"loadbalancer_id": lb["id"]}), 200)
        port_id = lb["vip_port_id"]
        self._json(self._net.get("/floatingips", params={"port_id": port_id}), 200)
        fip = {
            "floatingip": {
                "floating_network_id": self._cloud.seeded.external_network_id,
                "port_id": port_id,
            }
        }
        self._json(self._net.post("/floatingips", json=fip), 201)
        return str(lb["id"])

    def join(self, lb_id: str, ports: int, members: list[Node]) -> None:
        self._json(self._lb.get(f"/lbaas/loadbalancers/{lb_id}"), 200)
        self._json(self._lb.get("/lbaas/listeners", params={"loadbalancer_id": lb_id}), 200)
        for i, (_, node_port, _) in enumerate(ten_ports(ports)):
            pools = self._json(
                self._lb.get("/lbaas/pools", params={"loadbalancer_id": lb_id}), 200
            )["pools"]
            (pool,) = [p for p in pools if p["name"].startswith(f"pool_{i}_")]
            self._json(self._lb.get(f"/lbaas/pools/{pool['id']}/members"), 200)
            body = {"members": member_bodies(members, node_port)}
            self._json(self._lb.put(f"/lbaas/pools/{pool['id']}/members", json=body), 202)
            self.wait_active(lb_id)


def member_bodies(members: list[Node], node_port: int) -> list[dict[str, Any]]:
    return [
        {"name": n.name, "address": n.status.addresses[0].address, "protocol_port": node_port}
        for n in members
    ]


def run_upstream(cloud: RealCloud, settle: float, ports: int, node_count: int) -> list[Measured]:
    upstream = Upstream(cloud)
    upstream.warm()
    ids: dict[str, str] = {}

    def create() -> str:
        upstream.polls = 0
        ids["lb"] = upstream.create("upstream-many", ports, nodes(node_count))
        return f"{upstream.polls} ACTIVE polls"

    def join() -> str:
        upstream.polls = 0
        upstream.join(ids["lb"], ports, nodes(node_count + 1))
        return f"{upstream.polls} ACTIVE polls"

    name = lb_name("upstream-many")
    rows = [measure(cloud, settle, "upstream's", "create", create, lb=name)]
    rows.append(measure(cloud, settle, "upstream's", "node joins", join, lb=name))
    check_members(cloud, "upstream-many", ports, node_count + 1)
    return rows


def check_members(cloud: RealCloud, name: str, ports: int, node_count: int) -> None:
    """Each algorithm left every pool with every node: the figures are of a finished job."""
    lb_api = cloud.connection("ccm").load_balancer
    (lb,) = lb_api.load_balancers(name=lb_name(name))
    assert lb.provisioning_status == "ACTIVE", lb.provisioning_status
    pools = list(lb_api.pools(loadbalancer_id=lb.id))
    assert len(pools) == ports, len(pools)
    wanted = {seed_node(i).internal_ip for i in range(node_count)}
    for pool in pools:
        assert {m.address for m in lb_api.members(pool)} == wanted, pool.name


def table(rows: list[Measured], args: argparse.Namespace) -> str:
    lines = [
        "# A Service of many ports on the real Octavia",
        "",
        f"`python -m bench.multi_listener --ports {args.ports} --nodes {args.nodes} "
        f"--settle {','.join(str(s) for s in args.settle)}` on "
        f"{time.strftime('%Y-%m-%d')}, OpenStack {release()} (the conformance stack: real "
        "Keystone, Neutron, Octavia and Nova on this machine; Octavia's noop driver, whose "
        "objects a settler makes ACTIVE `settle` seconds after each write; a 1-port load "
        "balancer and its floating IP are made first, unmeasured, to warm the services). "
        "A Service of "
        f"{args.ports} TCP ports on {args.nodes} nodes is created, then one more node joins "
        "(every pool gains a member). Seconds: from the first call until the load "
        "balancer is ACTIVE with everything in place (seen by an observer whose reads are "
        "not counted: pyccm's provider returns once its last write is accepted). Calls: "
        "Neutron and Octavia requests in the access logs while the algorithm runs (Keystone "
        "left out; Octavia's own Neutron calls for the VIP port included, the same for "
        "both); `GET lb`: reads of the load balancer itself.",
        "",
        "| settle (s) | algorithm | moment | seconds | calls | writes | `GET lb` | syncs / polls |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.settle:g} | {r.algorithm} | {r.moment} | {r.seconds:.1f} | {r.calls} "
            f"| {r.writes} | {r.lb_gets} | {r.detail} |"
        )
    return "\n".join(lines) + "\n"


def one_settle(settle: float, args: argparse.Namespace) -> list[Measured]:
    with tempfile.TemporaryDirectory(prefix="pyccm-multi-listener-") as scratch:
        workdir = Path(scratch)
        with running_real_cloud(workdir, nodes=args.nodes + 1, settle_delay_s=settle) as cloud:
            # Octavia's and Neutron's first load balancer and floating IP cost them seconds
            # of their own start-up (extension discovery, first writes): paid here, by
            # neither algorithm.
            Upstream(cloud).create("warm-up", 1, nodes(1))
            wait_active(cloud, lb_name("warm-up"))
            rows = run_pyccm(cloud, workdir, settle, args.ports, args.nodes)
            rows += run_upstream(cloud, settle, args.ports, args.nodes)
    for row in rows:
        print(row, flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.multi_listener")
    parser.add_argument("--ports", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument(
        "--settle",
        type=lambda text: [float(s) for s in text.split(",")],
        default=[0.5, 3.0],
        help="seconds from a write to ACTIVE, comma-separated (default 0.5,3)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rows = [row for settle in args.settle for row in one_settle(settle, args)]
    args.out.write_text(table(rows, args))
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
