"""cloud-node sync decisions against the fake cloud (docs/upstream.md#cloud-node)."""

from __future__ import annotations

import pytest

from pyccm.protocol.messages import PatchNode, PatchNodeStatus, RecordEvent, Topic
from pyccm.protocol.views import Node, NodeAddress, Taint
from pyccm.provider.errors import CloudError
from pyccm.workers.node.controller import (
    ADDRESSES,
    UNINITIALIZED_TAINT,
    NodeController,
    NodeSettings,
)
from pyccm.workers.runtime.controller import SyncFailed
from pyccm.workers.runtime.replica import Replica
from pyccm_sim.fake_provider import FakeCloud
from tests.support.nodes import node

UNINITIALIZED = Taint(key=UNINITIALIZED_TAINT, value="true", effect="NoSchedule")


def make_node(
    name: str = "n1",
    *,
    tainted: bool = True,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    addresses: tuple[NodeAddress, ...] = (),
    provider_id: str = "",
) -> Node:
    return node(
        name,
        1,
        provider_id,
        labels=labels,
        annotations=annotations,
        taints=(UNINITIALIZED,) if tainted else (),
        addresses=((a.type, a.address) for a in addresses),
    )


@pytest.fixture
def cloud() -> FakeCloud:
    cloud = FakeCloud()
    cloud.add_server("n1", internal_ip="10.0.0.10", instance_type="m1.large", zone="az-1")
    return cloud


def controller_for(node: Node, cloud: FakeCloud) -> NodeController:
    replica = Replica()
    replica.apply(Topic.NODE, node.name, node)
    instances = cloud.instances()
    assert instances is not None
    return NodeController(replica=replica, instances=instances, settings=NodeSettings())


def test_an_uninitialized_node_gets_provider_id_labels_addresses_and_loses_the_taint(
    cloud: FakeCloud,
) -> None:
    actions = controller_for(make_node(), cloud).sync("n1")
    patch, status, event = actions
    assert isinstance(patch, PatchNode)
    assert patch.provider_id.startswith("fake://")
    assert patch.labels == {
        "node.kubernetes.io/instance-type": "m1.large",
        "beta.kubernetes.io/instance-type": "m1.large",
        "topology.kubernetes.io/zone": "az-1",
        "failure-domain.beta.kubernetes.io/zone": "az-1",
        "topology.kubernetes.io/region": "RegionOne",
        "failure-domain.beta.kubernetes.io/region": "RegionOne",
    }
    assert patch.remove_taints == ((UNINITIALIZED_TAINT, ""),)
    assert isinstance(status, PatchNodeStatus)
    assert status.addresses is not None
    assert [a.address for a in status.addresses] == ["10.0.0.10", "n1"]
    assert isinstance(event, RecordEvent)
    assert event.reason == "Synced"


def test_an_existing_provider_id_is_never_overwritten(cloud: FakeCloud) -> None:
    server_id = cloud.add_server("n1", internal_ip="10.0.0.10").server_id
    patch = controller_for(make_node(provider_id=f"fake:///{server_id}"), cloud).sync("n1")[0]
    assert isinstance(patch, PatchNode)
    assert patch.provider_id == ""


def test_a_node_without_a_server_gets_a_warning_and_keeps_its_taint(cloud: FakeCloud) -> None:
    controller = controller_for(make_node("ghost"), cloud)
    with pytest.raises(SyncFailed) as failed:
        controller.sync("ghost")
    (event,) = failed.value.actions
    assert isinstance(event, RecordEvent)
    assert (event.type, event.reason) == ("Warning", "FailedToInitializeNode")
    assert "no server found" in event.message
    # The same failure again within the interval is not repeated.
    with pytest.raises(SyncFailed) as again:
        controller.sync("ghost")
    assert again.value.actions == ()


def test_a_cloud_error_is_explained_and_retried(cloud: FakeCloud) -> None:
    cloud.fail_next("instance_metadata", CloudError("nova answered 503", status=503))
    with pytest.raises(SyncFailed) as failed:
        controller_for(make_node(), cloud).sync("n1")
    assert "503" in failed.value.actions[0].message  # type: ignore[union-attr]


def test_a_provided_node_ip_that_the_cloud_does_not_have_blocks_initialization(
    cloud: FakeCloud,
) -> None:
    node = make_node(annotations={"alpha.kubernetes.io/provided-node-ip": "10.9.9.9"})
    with pytest.raises(SyncFailed) as failed:
        controller_for(node, cloud).sync("n1")
    assert "10.9.9.9" in failed.value.actions[0].message  # type: ignore[union-attr]


def test_existing_labels_are_not_overwritten_by_additional_labels(cloud: FakeCloud) -> None:
    node = make_node(labels={"topology.kubernetes.io/zone": "kept"})
    patch = controller_for(node, cloud).sync("n1")[0]
    assert isinstance(patch, PatchNode)
    # Zone labels are the cloud's to set (upstream sets them); only additional labels are guarded.
    assert patch.labels["topology.kubernetes.io/zone"] == "az-1"


def test_an_initialized_node_reconciles_beta_labels_without_a_cloud_call(cloud: FakeCloud) -> None:
    node = make_node(tainted=False, labels={"beta.kubernetes.io/instance-type": "m1.large"})
    actions = controller_for(node, cloud).sync("n1")
    assert actions == (
        PatchNode(name="n1", labels={"node.kubernetes.io/instance-type": "m1.large"}),
    )
    assert cloud.calls == []


def test_the_address_refresh_writes_only_on_change(cloud: FakeCloud) -> None:
    current = (
        NodeAddress(type="InternalIP", address="10.0.0.10"),
        NodeAddress(type="Hostname", address="n1"),
    )
    unchanged = make_node(tainted=False, addresses=current)
    assert controller_for(unchanged, cloud).sync(ADDRESSES + "n1") == ()
    stale = make_node(
        tainted=False, addresses=(NodeAddress(type="InternalIP", address="10.0.0.99"),)
    )
    (status,) = controller_for(stale, cloud).sync(ADDRESSES + "n1")
    assert isinstance(status, PatchNodeStatus)
    assert status.addresses == current


def test_a_deleted_node_needs_nothing(cloud: FakeCloud) -> None:
    controller = controller_for(make_node(), cloud)
    assert controller.sync("not-there") == ()


def test_initialization_writes_the_addresses_only_when_they_change(cloud: FakeCloud) -> None:
    # Upstream's initialization patches the addresses through its periodic routine, which
    # writes nothing when the kubelet's addresses are already the cloud's.
    current = (
        NodeAddress(type="InternalIP", address="10.0.0.10"),
        NodeAddress(type="Hostname", address="n1"),
    )
    patch, event = controller_for(make_node(addresses=current), cloud).sync("n1")
    assert isinstance(patch, PatchNode)
    assert isinstance(event, RecordEvent)
    stale = (NodeAddress(type="InternalIP", address="10.0.0.99"),)
    _, status, _ = controller_for(make_node(addresses=stale), cloud).sync("n1")
    assert isinstance(status, PatchNodeStatus)
    assert status.addresses == current
