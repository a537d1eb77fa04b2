"""The node worker's batch of lookups (`instances_metadata`) on the real Nova and Neutron:
one server listing with Nova's microversion and one port list with repeated `device_id`
filters give every node the metadata its own lookups give (pyccm/workers/node/batch.py).
Counted from the real services' access logs."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from pyccm.protocol.views import Node, NodeSpec, OwnerMeta
from pyccm.provider.openstack import create_cloud
from pyccm.provider.openstack.cloud import OpenStackCloud
from pyccm.provider.settings import ProviderSettings
from tests.conformance.realcloud import RealCloud

pytestmark = pytest.mark.conformance

SERVERS = 60  # more than one port list (50 servers a call)


@pytest.fixture
def cloud(real_cloud: RealCloud) -> Iterator[OpenStackCloud]:
    settings = ProviderSettings(
        cloud_config=Path(real_cloud.cloud_conf_path),
        cluster_name="batch",
        cloud_api_qps=1000.0,
        cloud_api_burst=1000,
    )
    built = create_cloud(settings=settings, registry=CollectorRegistry(), environ={})
    yield built
    built.close()


def test_many_nodes_metadata_is_each_nodes_own_from_one_listing_and_a_port_list_per_50(
    real_cloud: RealCloud, cloud: OpenStackCloud
) -> None:
    first = int(ipaddress.IPv4Address("10.0.48.0"))
    names = [(f"batch-{i:03d}", str(ipaddress.IPv4Address(first + i))) for i in range(SERVERS)]
    real_cloud.add_servers(names)
    nodes = [
        Node(metadata=OwnerMeta(name=name, uid=f"uid-{name}"), spec=NodeSpec()) for name, _ in names
    ]
    instances = cloud.instances()
    assert instances is not None

    mark = real_cloud.mark()
    many = instances.instances_metadata(nodes=nodes)
    calls = [c for c in real_cloud.calls(since=mark) if c.service in ("nova", "neutron")]

    lists = [(c.service, c.path.rstrip("/").rsplit("/", 1)[-1]) for c in calls if c.method == "GET"]
    assert lists.count(("nova", "detail")) == 1
    # Nova's server list reads the servers' security groups from Neutron itself (Nova 34
    # with `fields=device_id&fields=security_groups`, Nova 29 with the device ids alone):
    # not calls of pyccm's, which are told apart by their user agent.
    port_lists = [
        c
        for c in calls
        if c.path.rstrip("/").endswith("/ports") and c.user_agent.startswith("pyccm/")
    ]
    assert len(port_lists) == 2
    assert all(c.status == 200 for c in calls)
    # 50 servers a list, the lists at once: in either order.
    assert sorted(c.query.count("device_id=") for c in port_lists) == [10, 50]
    assert set(many) == {name for name, _ in names}
    for node, (_, ip) in zip(nodes, names, strict=True):
        assert many[node.name] == instances.instance_metadata(node=node)
        assert ("InternalIP", ip) in {(a.type, a.address) for a in many[node.name].node_addresses}
