"""Ownership by cluster id on the real services (kubernetes/cloud-provider-openstack#3102,
kubernetes/cloud-provider-openstack#3145):
the tags pyccm writes round-trip through the real Octavia (a create's `tags`) and Neutron (the tags
PUT after a floating IP's create), the real `tags` filters find them, a second cluster of the same
name writes nothing to them, and `delete_owned` (what `pyccm gc --yes` calls) removes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from pyccm.provider.errors import OwnedByAnotherCluster
from pyccm.provider.interface import LoadBalancers
from pyccm.provider.openstack import create_cloud
from pyccm.provider.openstack.cloud import OpenStackCloud
from pyccm.provider.settings import ProviderSettings
from tests.conformance.realcloud import RealCloud
from tests.conformance.test_pagination_on_real_openstack import big_service, many_nodes, until_done
from tests.support.waiting import wait_for

pytestmark = pytest.mark.conformance

ONE = "11111111-aaaa-4aaa-8aaa-111111111111"
TWO = "22222222-bbbb-4bbb-8bbb-222222222222"


@pytest.fixture
def make(real_cloud: RealCloud, tmp_path: Path) -> Iterator[Callable[[str], LoadBalancers]]:
    clouds: list[OpenStackCloud] = []

    def build(cluster_id: str) -> LoadBalancers:
        path = tmp_path / f"cloud-{len(clouds)}.conf"
        path.write_text(real_cloud.cloud_conf_path.read_text())
        provider_settings = ProviderSettings(
            cloud_config=path,
            cluster_name="owners",
            cluster_id=cluster_id,
            cloud_api_qps=1000.0,
            cloud_api_burst=1000,
        )
        cloud = create_cloud(settings=provider_settings, registry=CollectorRegistry(), environ={})
        clouds.append(cloud)
        lbs = cloud.load_balancers()
        assert lbs is not None
        return lbs

    yield build
    for cloud in clouds:
        cloud.close()


def test_tags_round_trip_filters_find_them_and_another_cluster_writes_nothing(
    real_cloud: RealCloud, make: Callable[[str], LoadBalancers]
) -> None:
    ours, theirs = make(ONE), make(TWO)
    service, nodes = big_service(), many_nodes(2)
    until_done(lambda: ours.ensure(service=service, nodes=nodes))
    tag = f"pyccm-cluster:{ONE}"
    conn = real_cloud.connection("ccm")
    # The real filters, Octavia's and Neutron's `tags`, find what the tags say.
    (lb,) = list(conn.load_balancer.load_balancers(tags=tag))
    assert lb.name == "kube_service_owners_paging_big"
    assert tag in lb.tags
    fips = list(conn.network.ips(tags=tag))
    assert [f.port_id for f in fips] == [lb.vip_port_id]
    owned = {(r.kind, r.id) for r in ours.owned()}
    assert owned == {("load balancer", lb.id), ("floating IP", fips[0].id)}

    mark = real_cloud.mark()
    with pytest.raises(OwnedByAnotherCluster):
        theirs.ensure(service=service, nodes=nodes)
    assert theirs.owned() == ()
    assert real_cloud.writes(since=mark) == []

    for resource in ours.owned():  # what `pyccm gc --yes` does with orphans
        until_done(partial(ours.delete_owned, resource))
    wait_for(
        lambda: not list(conn.load_balancer.load_balancers(tags=tag)),
        timeout=120,
        what="the owned load balancer is gone",
    )
    assert list(conn.network.ips(tags=tag)) == []
