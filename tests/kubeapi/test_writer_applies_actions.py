"""The writer's verbs, checked in the simulator's store."""

from __future__ import annotations

import msgspec

from pyccm.kubeapi.client import KubeClient
from pyccm.kubeapi.writer import Writer
from pyccm.protocol.messages import (
    DeleteNode,
    FailureKind,
    ObjectRef,
    PatchNode,
    PatchNodeStatus,
    PatchServiceStatus,
    RecordEvent,
)
from pyccm.protocol.views import LoadBalancerIngress, Node, NodeAddress, Taint
from pyccm_sim.kube.testing import KubeSimHandle

UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"


def test_a_node_patch_sets_labels_provider_id_and_removes_the_taint(
    kube: KubeSimHandle, client: KubeClient
) -> None:
    action = PatchNode(
        name="node-0000",
        labels={"topology.kubernetes.io/zone": "az-1"},
        provider_id="openstack:///abc",
        remove_taints=((UNINITIALIZED, ""),),
        add_taints=(Taint(key="example.com/x", effect="NoSchedule"),),
    )
    assert Writer(client=client).apply((action,)) == ()
    node = kube.get("nodes", "node-0000")
    assert node is not None
    assert node["metadata"]["labels"]["topology.kubernetes.io/zone"] == "az-1"
    assert node["spec"]["providerID"] == "openstack:///abc"
    assert [t["key"] for t in node["spec"]["taints"]] == ["example.com/x"]


def test_a_patch_that_changes_nothing_is_not_sent(kube: KubeSimHandle, client: KubeClient) -> None:
    writer = Writer(client=client)
    writer.apply((PatchNode(name="node-0000", labels={"a": "b"}),))
    version = kube.get("nodes", "node-0000")["metadata"]["resourceVersion"]  # type: ignore[index]
    writer.apply((PatchNode(name="node-0000", labels={"a": "b"}),))
    assert kube.get("nodes", "node-0000")["metadata"]["resourceVersion"] == version  # type: ignore[index]


def test_node_status_addresses_are_replaced_as_a_whole(
    kube: KubeSimHandle, client: KubeClient
) -> None:
    addresses = (NodeAddress(type="InternalIP", address="10.1.1.1"),)
    assert (
        Writer(client=client).apply((PatchNodeStatus(name="node-0001", addresses=addresses),)) == ()
    )
    node = kube.get("nodes", "node-0001")
    assert node is not None
    assert node["status"]["addresses"] == [{"type": "InternalIP", "address": "10.1.1.1"}]
    assert node["status"]["conditions"]  # untouched


def test_a_node_delete_with_a_stale_uid_is_refused(kube: KubeSimHandle, client: KubeClient) -> None:
    (failure,) = Writer(client=client).apply((DeleteNode(name="node-0002", uid="not-its-uid"),))
    assert failure.kind is FailureKind.PRECONDITION
    assert kube.get("nodes", "node-0002") is not None
    uid = kube.get("nodes", "node-0002")["metadata"]["uid"]  # type: ignore[index]
    assert Writer(client=client).apply((DeleteNode(name="node-0002", uid=uid),)) == ()
    assert kube.get("nodes", "node-0002") is None


def test_a_missing_node_is_reported_as_not_found(client: KubeClient) -> None:
    (failure,) = Writer(client=client).apply((PatchNode(name="nope", labels={"a": "b"}),))
    assert failure.kind is FailureKind.NOT_FOUND


def test_repeated_events_are_aggregated_into_one_with_a_count(
    kube: KubeSimHandle, client: KubeClient
) -> None:
    writer = Writer(client=client)
    event = RecordEvent(
        regarding=ObjectRef(kind="Node", name="node-0000", uid="u"),
        reason="Synced",
        message="ok",
        component="c",
    )
    writer.apply((event,))
    writer.apply((event,))
    events = kube.list_objects("events", "default")
    assert [(e["reason"], e["count"]) for e in events] == [("Synced", 2)]


def test_service_status_gets_ingress_and_finalizer(kube: KubeSimHandle, client: KubeClient) -> None:
    service = kube.list_objects("services")[0]
    meta = service["metadata"]
    action = PatchServiceStatus(
        namespace=meta["namespace"],
        name=meta["name"],
        uid=meta["uid"],
        ingress=(LoadBalancerIngress(ip="172.24.4.10"),),
        add_finalizers=("service.kubernetes.io/load-balancer-cleanup",),
    )
    assert Writer(client=client).apply((action,)) == ()
    stored = kube.get("services", meta["name"], meta["namespace"])
    assert stored is not None
    assert stored["status"]["loadBalancer"]["ingress"] == [{"ip": "172.24.4.10"}]
    assert stored["metadata"]["finalizers"] == ["service.kubernetes.io/load-balancer-cleanup"]


def node_view(kube: KubeSimHandle, name: str) -> Node:
    return msgspec.json.decode(msgspec.json.encode(kube.get("nodes", name)), type=Node)


def test_a_current_cached_node_saves_the_read(kube: KubeSimHandle, client: KubeClient) -> None:
    cached = node_view(kube, "node-0000")
    writer = Writer(client=client, cached_node=lambda name: cached)
    before = len(kube.requests())
    assert writer.apply((PatchNode(name="node-0000", labels={"a": "b"}),)) == ()
    assert [r["verb"] for r in kube.requests()[before:]] == ["patch"]


def test_a_stale_cached_node_conflicts_and_is_read_again(
    kube: KubeSimHandle, client: KubeClient
) -> None:
    stale = node_view(kube, "node-0000")
    kube.patch("nodes", "node-0000", b'{"metadata": {"labels": {"someone": "else"}}}')
    writer = Writer(client=client, cached_node=lambda name: stale)
    before = len(kube.requests())
    assert writer.apply((PatchNode(name="node-0000", remove_taints=((UNINITIALIZED, ""),)),)) == ()
    calls = [(r["verb"], r["code"]) for r in kube.requests()[before:]]
    assert calls == [("patch", 409), ("get", 200), ("patch", 200)]
    node = kube.get("nodes", "node-0000")
    assert node is not None
    assert node["metadata"]["labels"]["someone"] == "else"
    assert not node["spec"].get("taints")


def test_a_writer_that_may_no_longer_write_sends_nothing_and_says_not_leader(
    kube: KubeSimHandle, client: KubeClient
) -> None:
    # A manager that released its Lease kept draining queued writes while
    # the new leader wrote too. Once `may_write` says no, nothing more reaches the API.
    allowed = [True]
    writer = Writer(client=client, may_write=lambda: allowed[0])
    first = PatchNode(name="node-0000", labels={"written": "yes"})
    assert writer.apply((first,)) == ()
    allowed[0] = False
    sent = len(kube.requests())
    later = (
        PatchNode(name="node-0001", labels={"written": "no"}),
        PatchNode(name="node-0002", labels={"written": "no"}),
    )

    failures = writer.apply(later)

    assert [(f.index, f.kind) for f in failures] == [
        (0, FailureKind.NOT_LEADER),
        (1, FailureKind.NOT_LEADER),
    ]
    assert len(kube.requests()) == sent
    node = kube.get("nodes", "node-0001")
    assert node is not None
    assert "written" not in node["metadata"].get("labels", {})
