"""The fake cloud behaves like a provider and can be scripted by controller tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyccm.protocol.views import OwnerMeta, Service
from pyccm.provider.errors import AmbiguousInstance, CloudError, InstanceNotFound, RetryAfter
from pyccm.provider.interface import Route
from pyccm.provider.settings import ProviderSettings
from pyccm_sim.fake_provider import ANNOTATION_LB_ADDRESS, ANNOTATION_LB_ID, FakeCloud, create_cloud
from tests.support.nodes import node

SERVICE = Service(metadata=OwnerMeta(name="web", namespace="default", uid="u1"))


@pytest.fixture
def cloud() -> FakeCloud:
    fake = FakeCloud()
    fake.add_server("node-0000", internal_ip="10.0.0.10", zone="az1")
    return fake


def test_a_seeded_server_has_metadata_and_a_stable_provider_id(cloud: FakeCloud) -> None:
    instances = cloud.instances()
    assert instances is not None

    first = instances.instance_metadata(node=node("node-0000"))
    again = FakeCloud()
    again.add_server("node-0000", internal_ip="10.0.0.10")
    second = again.instances()

    assert first.zone == "az1"
    assert first.region == "RegionOne"
    assert first.node_addresses[0].address == "10.0.0.10"
    assert second is not None
    assert second.instance_metadata(node=node("node-0000")).provider_id == first.provider_id


def test_a_missing_instance_does_not_exist_and_has_no_metadata(cloud: FakeCloud) -> None:
    instances = cloud.instances()
    assert instances is not None
    cloud.remove_server("node-0000")

    assert instances.instance_exists(node=node("node-0000")) is False
    with pytest.raises(InstanceNotFound):
        instances.instance_metadata(node=node("node-0000"))


def test_a_provider_id_is_looked_up_by_id_not_by_name(cloud: FakeCloud) -> None:
    instances = cloud.instances()
    assert instances is not None
    provider_id = instances.instance_metadata(node=node("node-0000")).provider_id

    assert instances.instance_exists(node=node("renamed", provider_id=provider_id)) is True
    assert instances.instance_exists(node=node("node-0000", provider_id="fake:///gone")) is False


def test_a_shut_down_server_reports_shutdown(cloud: FakeCloud) -> None:
    instances = cloud.instances()
    assert instances is not None
    cloud.set_shutdown("node-0000")

    assert instances.instance_shutdown(node=node("node-0000")) is True
    assert instances.instance_exists(node=node("node-0000")) is True


def test_two_servers_with_one_name_are_ambiguous(cloud: FakeCloud) -> None:
    instances = cloud.instances()
    assert instances is not None
    cloud._servers["other-id"] = cloud._servers[next(iter(cloud._servers))]

    with pytest.raises(AmbiguousInstance):
        instances.instance_metadata(node=node("node-0000"))


def test_scripted_failures_hit_the_next_calls_only(cloud: FakeCloud) -> None:
    instances = cloud.instances()
    assert instances is not None
    cloud.fail_next("instance_exists", CloudError("boom", status=503), times=2)

    for _ in range(2):
        with pytest.raises(CloudError):
            instances.instance_exists(node=node("node-0000"))
    assert instances.instance_exists(node=node("node-0000")) is True
    assert cloud.calls_of("instance_exists") == ["node-0000"] * 3


def test_delays_go_through_the_injected_sleep() -> None:
    slept: list[float] = []
    fake = FakeCloud(sleep=slept.append)
    fake.add_server("node-0000")
    fake.set_delay("instance_shutdown", 2.5)
    instances = fake.instances()
    assert instances is not None

    instances.instance_shutdown(node=node("node-0000"))

    assert slept == [2.5]


def test_a_provisioning_load_balancer_asks_to_be_called_again(cloud: FakeCloud) -> None:
    lbs = cloud.load_balancers()
    assert lbs is not None
    cloud.set_lb_provisioning(syncs=2, retry_delay=3.0)
    nodes = [node("node-0000", internal_ips=("10.0.0.10",))]

    delays = []
    for _ in range(2):
        with pytest.raises(RetryAfter) as caught:
            lbs.ensure(service=SERVICE, nodes=nodes)
        delays.append(caught.value.delay)
    outcome = lbs.ensure(service=SERVICE, nodes=nodes)

    assert delays == [3.0, 3.0]
    assert outcome.ingress[0].ip == outcome.annotations_to_set[ANNOTATION_LB_ADDRESS]
    lb = cloud.load_balancer("default/web")
    assert lb is not None
    assert outcome.annotations_to_set[ANNOTATION_LB_ID] == lb.lb_id
    assert lb.members == ("node-0000",)


def test_forced_internal_returns_a_warning_event(cloud: FakeCloud) -> None:
    lbs = cloud.load_balancers()
    assert lbs is not None
    cloud.set_forced_internal()

    outcome = lbs.ensure(service=SERVICE, nodes=[])

    assert [e.reason for e in outcome.events] == ["LoadBalancerForcedInternal"]
    assert outcome.ingress[0].ip.startswith("10.0.")


def test_update_changes_members_and_delete_is_idempotent(cloud: FakeCloud) -> None:
    lbs = cloud.load_balancers()
    assert lbs is not None
    lbs.ensure(service=SERVICE, nodes=[])

    lbs.update(
        service=SERVICE,
        nodes=[node("b", internal_ips=("10.0.0.2",)), node("a", internal_ips=("10.0.0.1",))],
    )
    lb = cloud.load_balancer("default/web")
    lbs.ensure_deleted(service=SERVICE)
    lbs.ensure_deleted(service=SERVICE)

    assert lb is not None
    assert lb.members == ("a", "b")
    assert lbs.get(service=SERVICE) is None


def test_routes_map_next_hops_back_to_nodes_or_blackholes(cloud: FakeCloud) -> None:
    routes = cloud.routes()
    assert routes is not None
    target = node("node-0000", internal_ips=("10.0.0.10",))
    route = Route(
        name="",
        target_node="node-0000",
        destination_cidr="10.64.0.0/24",
        target_node_addresses=target.status.addresses,
    )

    routes.create(name_hint="uid", route=route)
    listed_with_node = routes.list(nodes=[target])
    listed_without = routes.list(nodes=[])
    routes.delete(route=listed_with_node[0])

    assert cloud.route_table() == {}
    assert listed_with_node[0].target_node == "node-0000"
    assert not listed_with_node[0].blackhole
    assert listed_without[0].blackhole
    assert listed_without[0].target_node == "10.0.0.10"


def test_the_factory_seeds_servers_from_a_yaml_file(tmp_path: Path) -> None:
    seed = tmp_path / "fake.yaml"
    seed.write_text(
        "servers:\n  - name: node-0001\n    internal_ip: 10.0.0.11\n    shutdown: true\n"
    )

    cloud = create_cloud(settings=ProviderSettings(cloud_config=seed))
    instances = cloud.instances()

    assert instances is not None
    assert instances.instance_shutdown(node=node("node-0001")) is True
