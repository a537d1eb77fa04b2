"""`pyccm gc` and routes: a route is this cluster's when it lies in a CIDR
the cluster claims on the router (`pyccm-routes:<id>=<cidr>`, the route worker's tag).
While the cluster lives, the routes of Nodes that are gone are orphans; once it is gone,
every route it claims is, and its claims go with the last one. Another cluster's routes,
routes outside every claim and routes on an unclaimed router are never touched."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pyccm_sim.kube.testing import KubeSimHandle
from pyccm_sim.openstack.testing import OpenStackSimHandle
from pyccm_sim.scenario import seed_node
from tests.support.cli import pyccm

OTHER = "22222222-2222-2222-2222-222222222222"
OURS_CIDR, OTHER_CIDR = "10.64.0.0/16", "10.65.0.0/16"


def hop(index: int) -> str:
    return seed_node(index).internal_ip


def pod_cidr(index: int, cidr: str = OURS_CIDR) -> str:
    return seed_node(index, cidr).pod_cidr


@pytest.fixture
def live_nodes(kube: KubeSimHandle) -> Iterator[None]:
    """Nodes 0 and 1 of this cluster live (with podCIDRs); node 2 is gone."""
    for index in (0, 1):
        seed = seed_node(index, OURS_CIDR)
        kube.create(
            "nodes",
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": seed.name},
                "spec": {"podCIDR": seed.pod_cidr, "podCIDRs": [seed.pod_cidr]},
                "status": {"addresses": [{"type": "InternalIP", "address": seed.internal_ip}]},
            },
        )
    yield
    for index in (0, 1):
        kube.delete("nodes", seed_node(index).name)


def routes_of(sim: OpenStackSimHandle, router_id: str) -> set[tuple[str, str]]:
    router = next(r for r in sim.resources("router") if r["id"] == router_id)
    return {(r["destination"], r["nexthop"]) for r in router["routes"]}


def tags_of(sim: OpenStackSimHandle, router_id: str) -> set[str]:
    return set(next(r for r in sim.resources("router") if r["id"] == router_id)["tags"])


OURS = {(pod_cidr(i), hop(i)) for i in (0, 1, 2)}
THEIRS = {(pod_cidr(3, OTHER_CIDR), hop(3))}
OUTSIDE = {("192.168.77.0/24", hop(0))}


@pytest.fixture
def shared_router(sim: OpenStackSimHandle, cluster_id: str) -> Iterator[str]:
    """The seeded router, shared: this cluster's three routes (nodes 0-2) and claim,
    another cluster's route and claim, and a route outside every claim."""
    conn = sim.connection()
    router_id = sim.seeded.router_id
    routes = [{"destination": d, "nexthop": n} for d, n in sorted(OURS | THEIRS | OUTSIDE)]
    conn.network.add_extra_routes_to_router(router_id, body={"router": {"routes": routes}})
    router = conn.network.get_router(router_id)
    conn.network.set_tags(
        router,
        [f"pyccm-routes:{cluster_id}=10.64.0.0_16", f"pyccm-routes:{OTHER}=10.65.0.0_16"],
    )
    yield router_id
    conn.close()


def gc(sim: OpenStackSimHandle, kube: KubeSimHandle | None, *extra: str) -> Any:
    flags: list[Any] = ["gc", "--cloud-config", sim.cloud_conf_path, *extra]
    if kube is not None:
        flags += ["--kubeconfig", kube.kubeconfig_path]
    return pyccm(*flags)


def route_rows(ran: Any) -> dict[str, dict[str, Any]]:
    return {o["id"]: o for o in ran.json()["orphans"] if o["kind"] == "route"}


def test_the_route_of_a_gone_node_is_listed_then_deleted_with_one_router_call(
    sim: OpenStackSimHandle, kube: KubeSimHandle, shared_router: str, live_nodes: None
) -> None:
    mark = sim.mark()
    dry = gc(sim, kube, "--output", "json")
    assert dry.code == 0, dry.stderr
    assert set(route_rows(dry)) == {pod_cidr(2)}
    assert route_rows(dry)[pod_cidr(2)]["name"] == hop(2)
    assert route_rows(dry)[pod_cidr(2)]["result"] == "orphan"
    assert sim.writes(since=mark) == []

    mark = sim.mark()
    ran = gc(sim, kube, "--yes", "--output", "json")

    assert ran.code == 0, ran.stderr
    assert route_rows(ran)[pod_cidr(2)]["result"] == "deleted"
    assert routes_of(sim, shared_router) == (OURS | THEIRS | OUTSIDE) - {(pod_cidr(2), hop(2))}
    router_writes = [c.path for c in sim.writes(since=mark) if "/routers/" in c.path]
    assert router_writes == [f"/network/v2.0/routers/{shared_router}/remove_extraroutes"]
    # The cluster lives: its claim stays.
    assert f"pyccm-routes:{OTHER}=10.65.0.0_16" in tags_of(sim, shared_router)
    assert len(tags_of(sim, shared_router)) == 2


def test_after_the_cluster_is_gone_its_routes_and_claim_go_and_nothing_else(
    sim: OpenStackSimHandle, shared_router: str, cluster_id: str
) -> None:
    table = gc(sim, None, "--cluster-id", cluster_id)
    assert table.code == 0, table.stderr
    for destination, _ in OURS:
        assert destination in table.stdout
    assert "router tag" in table.stdout
    assert routes_of(sim, shared_router) == OURS | THEIRS | OUTSIDE  # a dry run

    ran = gc(sim, None, "--cluster-id", cluster_id, "--yes", "--output", "json")

    assert ran.code == 0, ran.stderr
    assert {o["result"] for o in ran.json()["orphans"] if o["kind"] in ("route", "router tag")} == {
        "deleted"
    }
    assert routes_of(sim, shared_router) == THEIRS | OUTSIDE
    assert tags_of(sim, shared_router) == {f"pyccm-routes:{OTHER}=10.65.0.0_16"}


def test_the_other_clusters_gc_never_removes_this_clusters_routes(
    sim: OpenStackSimHandle, shared_router: str
) -> None:
    ran = gc(sim, None, "--cluster-id", OTHER, "--yes", "--output", "json")

    assert ran.code == 0, ran.stderr
    assert set(route_rows(ran)) == {pod_cidr(3, OTHER_CIDR)}
    assert routes_of(sim, shared_router) == OURS | OUTSIDE


def test_an_unclaimed_router_and_an_overlapping_claim_are_left_alone(
    sim: OpenStackSimHandle, shared_router: str, cluster_id: str
) -> None:
    """A cluster with no claim anywhere finds nothing; a third cluster claiming part of
    this cluster's CIDR makes those routes ambiguous: never listed, never deleted."""
    nobody = gc(sim, None, "--cluster-id", "33333333-3333-3333-3333-333333333333", "--yes")
    assert nobody.code == 0, nobody.stderr
    assert routes_of(sim, shared_router) == OURS | THEIRS | OUTSIDE

    conn = sim.connection()
    conn.network.add_tag(
        conn.network.get_router(shared_router), "pyccm-routes:third=10.64.0.0_23"
    )  # covers nodes 0 and 1
    conn.close()
    ran = gc(sim, None, "--cluster-id", cluster_id, "--yes", "--output", "json")

    assert set(route_rows(ran)) == {pod_cidr(2)}
    assert routes_of(sim, shared_router) == (OURS | THEIRS | OUTSIDE) - {(pod_cidr(2), hop(2))}
    # No route only this cluster claims is left: the claim goes, the third's stays.
    assert tags_of(sim, shared_router) == {
        f"pyccm-routes:{OTHER}=10.65.0.0_16",
        "pyccm-routes:third=10.64.0.0_23",
    }
