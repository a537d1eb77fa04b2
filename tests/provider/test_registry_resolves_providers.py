"""`--cloud-provider NAME` resolves through the registry; unknown names fail in one line."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import msgspec
import pytest

from pyccm.protocol.views import LoadBalancerIngress, NodeAddress
from pyccm.provider import registry
from pyccm.provider.errors import ConfigError
from pyccm.provider.interface import (
    InstanceMetadata,
    LoadBalancerOutcome,
    ProviderEvent,
    ProviderId,
    Route,
)
from pyccm.provider.settings import ProviderSettings
from pyccm_sim.fake_provider import FakeCloud


def third_party_cloud(*, settings: ProviderSettings) -> FakeCloud:
    return FakeCloud(region=f"third-party-{settings.cluster_name}")


def test_the_fake_provider_resolves_by_name() -> None:
    cloud = registry.create_cloud("fake", settings=ProviderSettings())

    assert cloud.name == "fake"
    assert cloud.instances() is not None


def test_both_builtins_are_known_without_an_installed_entry_point_table() -> None:
    assert {"fake", "openstack"} <= set(registry.known_providers())


def test_an_unknown_name_is_a_one_line_error_listing_the_known_names() -> None:
    with pytest.raises(ConfigError) as caught:
        registry.create_cloud("aws", settings=ProviderSettings())

    message = str(caught.value)
    assert "\n" not in message
    assert message == "unknown cloud provider 'aws' (known: fake, openstack)"


def test_a_third_party_entry_point_is_resolved(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = EntryPoint(
        name="thirdparty",
        value=f"{__name__}:third_party_cloud",
        group=registry.ENTRY_POINT_GROUP,
    )
    monkeypatch.setattr(registry, "entry_points", lambda group: [entry])

    cloud = registry.create_cloud("thirdparty", settings=ProviderSettings(cluster_name="c1"))

    assert isinstance(cloud, FakeCloud)
    assert cloud.region == "third-party-c1"
    assert "thirdparty" in registry.known_providers()


@pytest.mark.parametrize(
    "outcome",
    [
        InstanceMetadata(
            provider_id=ProviderId("openstack:///abc"),
            instance_type="m1.small",
            node_addresses=(NodeAddress(type="InternalIP", address="10.0.0.10"),),
            zone="nova",
            region="RegionOne",
            additional_labels={"a": "b"},
        ),
        LoadBalancerOutcome(
            ingress=(LoadBalancerIngress(ip="172.24.4.10", ip_mode="VIP"),),
            annotations_to_set={"loadbalancer.openstack.org/load-balancer-id": "x"},
            events=(ProviderEvent(type="Warning", reason="R", message="m"),),
        ),
        Route(name="r", target_node="node-0000", destination_cidr="10.64.0.0/24"),
    ],
)
def test_outcomes_survive_a_trip_over_the_bus(outcome: object) -> None:
    decoded = msgspec.msgpack.decode(msgspec.msgpack.encode(outcome), type=type(outcome))

    assert decoded == outcome
