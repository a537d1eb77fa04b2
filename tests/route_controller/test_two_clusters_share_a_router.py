"""Two clusters routing through one Neutron router (kubernetes/cloud-provider-openstack#3102 for
routes): each tags the router with its claim (`pyccm-routes:<cluster-id>=<cidr>`), keeps its own
routes, and never deletes a route another cluster's claim covers too; a router without any claim is
handled as upstream's (migration). Against the OpenStack simulator, provider and controller in this
process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY

from pyccm.protocol.messages import Topic
from pyccm.protocol.views import Node, NodeAddress, NodeSpec, NodeStatus, OwnerMeta
from pyccm.provider.openstack import create_cloud
from pyccm.provider.openstack.cloud import OpenStackCloud
from pyccm.provider.settings import ProviderSettings
from pyccm.workers.route.cidrs import parse_cluster_cidrs
from pyccm.workers.route.controller import KEY, RouteController, RouteSettings
from pyccm.workers.runtime.clock import FakeClock
from pyccm.workers.runtime.replica import Replica
from pyccm_sim.openstack.testing import OpenStackSimHandle
from pyccm_sim.scenario import seed_node

A = "11111111-1111-1111-1111-111111111111"
B = "22222222-2222-2222-2222-222222222222"


class Cluster:
    """One cluster's route controller: its nodes (seeded servers), its CIDR, its id."""

    def __init__(
        self, sim: OpenStackSimHandle, *, cluster_id: str, cidr: str, indexes: range
    ) -> None:
        self.cloud = create_cloud(
            settings=ProviderSettings(cloud_config=sim.cloud_conf_path, cluster_id=cluster_id)
        )
        assert isinstance(self.cloud, OpenStackCloud)
        self.replica, self.clock = Replica(), FakeClock()
        self.cidr = cidr
        self.seeds = {i: seed_node(i, cidr) for i in indexes}
        for seed in self.seeds.values():
            node = Node(
                metadata=OwnerMeta(name=seed.name, uid=f"uid-{seed.name}", resource_version="1"),
                spec=NodeSpec(pod_cidrs=(seed.pod_cidr,), pod_cidr=seed.pod_cidr),
                status=NodeStatus(
                    addresses=(NodeAddress(type="InternalIP", address=seed.internal_ip),)
                ),
            )
            self.replica.apply(Topic.NODE, node.name, node)
        routes = self.cloud.routes()
        assert routes is not None
        self.controller = RouteController(
            replica=self.replica,
            routes=routes,
            settings=RouteSettings(cluster_cidrs=parse_cluster_cidrs(cidr)),
            clock=self.clock,
        )

    def routes(self) -> set[tuple[str, str]]:
        return {(s.pod_cidr, s.internal_ip) for s in self.seeds.values()}

    def reconcile(self) -> None:
        self.clock.advance(1.0)
        self.controller.sync(KEY)

    def remove(self, index: int) -> None:
        self.replica.apply(Topic.NODE, self.seeds.pop(index).name, None)


@pytest.fixture
def clusters(sim: OpenStackSimHandle) -> Iterator[list[Cluster]]:
    made: list[Cluster] = []
    yield made
    for cluster in made:
        cluster.cloud.close()


def router(sim: OpenStackSimHandle) -> dict[str, object]:
    return next(r for r in sim.resources("router") if r["id"] == sim.seeded.router_id)


def router_routes(sim: OpenStackSimHandle) -> set[tuple[str, str]]:
    routes = router(sim)["routes"]
    assert isinstance(routes, list)
    return {(r["destination"], r["nexthop"]) for r in routes}


def refused_gauge() -> float:
    return REGISTRY.get_sample_value("pyccm_routes_claimed_by_other_clusters") or 0.0


def test_two_clusters_with_different_cidrs_tag_the_router_and_each_keeps_its_routes(
    sim: OpenStackSimHandle, clusters: list[Cluster]
) -> None:
    a = Cluster(sim, cluster_id=A, cidr="10.64.0.0/16", indexes=range(0, 2))
    b = Cluster(sim, cluster_id=B, cidr="10.65.0.0/16", indexes=range(2, 4))
    clusters += [a, b]

    a.reconcile()
    b.reconcile()
    a.reconcile()
    b.reconcile()

    assert router_routes(sim) == a.routes() | b.routes()
    assert set(router(sim)["tags"]) == {  # type: ignore[call-overload]
        f"pyccm-routes:{A}=10.64.0.0_16",
        f"pyccm-routes:{B}=10.65.0.0_16",
    }
    # The tag is written once per process, not at every reconcile.
    mark = sim.mark()
    a.reconcile()
    assert [c for c in sim.writes(mark) if "/tags/" in c.path] == []


def test_a_route_another_clusters_claim_covers_too_is_never_deleted(
    sim: OpenStackSimHandle, clusters: list[Cluster]
) -> None:
    """Both clusters route 10.64.0.0/16 (a misconfiguration upstream cannot even see): to
    b, a's routes are blackholes inside its CIDR, which it would delete without a's claim."""
    a = Cluster(sim, cluster_id=A, cidr="10.64.0.0/16", indexes=range(0, 2))
    b = Cluster(sim, cluster_id=B, cidr="10.64.0.0/16", indexes=range(2, 4))
    clusters += [a, b]
    a.reconcile()
    b.reconcile()

    b.reconcile()

    assert router_routes(sim) == a.routes() | b.routes()
    assert refused_gauge() == 2.0


def test_without_claims_the_router_is_upstreams_and_its_stale_routes_go(
    sim: OpenStackSimHandle, clusters: list[Cluster]
) -> None:
    """Migration from upstream: neither cluster has an id, so nothing is tagged, and the
    CIDR rule alone decides, as before: b deletes a's routes inside its CIDR."""
    a = Cluster(sim, cluster_id="", cidr="10.64.0.0/16", indexes=range(0, 2))
    b = Cluster(sim, cluster_id="", cidr="10.64.0.0/16", indexes=range(2, 4))
    clusters += [a, b]
    a.reconcile()

    b.reconcile()

    assert router_routes(sim) == b.routes()
    assert router(sim)["tags"] == []


def test_an_untagged_routers_leftover_is_adopted_and_the_router_tagged(
    sim: OpenStackSimHandle, clusters: list[Cluster]
) -> None:
    """Upstream's CCM left a route of a node since deleted; pyccm with an id takes over."""
    old = Cluster(sim, cluster_id="", cidr="10.64.0.0/16", indexes=range(0, 3))
    clusters.append(old)
    old.reconcile()
    ours = Cluster(sim, cluster_id=A, cidr="10.64.0.0/16", indexes=range(0, 2))
    clusters.append(ours)

    ours.reconcile()

    assert router_routes(sim) == ours.routes()
    assert router(sim)["tags"] == [f"pyccm-routes:{A}=10.64.0.0_16"]
