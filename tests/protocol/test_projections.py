"""What each controller's projection keeps, and the channel names it travels on."""

from __future__ import annotations

import itertools

import msgspec
import pytest

from pyccm.protocol.messages import Topic
from pyccm.protocol.projections import VIEWS, SharedStrings, channel, lean_node, project
from pyccm.protocol.views import Node, Service

NODE_JSON = {
    "metadata": {
        "name": "worker-1",
        "uid": "u-1",
        "resourceVersion": "812",
        "labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "true"},
        "annotations": {"alpha.kubernetes.io/provided-node-ip": "10.0.0.5"},
        "deletionTimestamp": "2026-11-25T09:00:00Z",
    },
    "spec": {
        "providerID": "openstack:///4f6c",
        "podCIDR": "10.244.1.0/24",
        "podCIDRs": ["10.244.1.0/24"],
        "taints": [{"key": "node.cloudprovider.kubernetes.io/shutdown", "effect": "NoSchedule"}],
    },
    "status": {
        "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}],
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "KubeletNotReady",
                "lastHeartbeatTime": "2026-11-25T09:00:10Z",
            },
            {"type": "NetworkUnavailable", "status": "True", "reason": "NoRouteCreated"},
            {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
        ],
    },
}


def node() -> Node:
    return msgspec.convert(NODE_JSON, Node)


def test_no_channel_is_a_prefix_of_another_or_of_control() -> None:
    # ZeroMQ subscriptions match prefixes: one would deliver another view's deltas.
    names = [channel(view, topic) for view, spec in VIEWS.items() for topic in spec.topics]
    names.append(Topic.CONTROL.value)
    for first, second in itertools.permutations(names, 2):
        assert not second.startswith(first), (first, second)


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_no_view_carries_a_resource_version_or_a_heartbeat(view: str) -> None:
    projected = project(VIEWS[view], Topic.NODE, node())
    assert isinstance(projected, Node)
    assert projected.metadata.resource_version == ""
    assert all(c.last_heartbeat_time is None for c in projected.status.conditions)


def test_the_lifecycle_view_keeps_readiness_taints_and_the_provider_id() -> None:
    projected = project(VIEWS["cloud-node-lifecycle"], Topic.NODE, node())
    assert isinstance(projected, Node)
    assert [(c.type, c.status) for c in projected.status.conditions] == [("Ready", "False")]
    assert [t.key for t in projected.spec.taints] == ["node.cloudprovider.kubernetes.io/shutdown"]
    assert projected.spec.provider_id == "openstack:///4f6c"
    assert projected.metadata.labels == {}


def test_the_route_view_keeps_pod_cidrs_addresses_and_network_unavailable() -> None:
    projected = project(VIEWS["route"], Topic.NODE, node())
    assert isinstance(projected, Node)
    assert projected.spec.pod_cidrs == ("10.244.1.0/24",)
    assert projected.status.addresses == node().status.addresses
    assert [(c.type, c.reason) for c in projected.status.conditions] == [
        ("NetworkUnavailable", "NoRouteCreated")
    ]
    assert projected.spec.taints == ()


def test_the_service_view_keeps_what_decides_a_backend() -> None:
    projected = project(VIEWS["service"], Topic.NODE, node())
    assert isinstance(projected, Node)
    assert projected.metadata.labels == NODE_JSON["metadata"]["labels"]  # type: ignore[index]
    assert projected.metadata.deletion_timestamp == "2026-11-25T09:00:00Z"
    assert projected.spec.taints == node().spec.taints
    assert projected.status.addresses == node().status.addresses
    assert projected.status.conditions == ()


def test_the_cloud_node_view_keeps_the_node_ip_annotation() -> None:
    projected = project(VIEWS["cloud-node"], Topic.NODE, node())
    assert isinstance(projected, Node)
    assert projected.metadata.annotations == NODE_JSON["metadata"]["annotations"]  # type: ignore[index]
    assert projected.metadata.labels == NODE_JSON["metadata"]["labels"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("spec", "finalizers", "kept"),
    [
        ({"type": "LoadBalancer"}, [], True),
        ({"type": "LoadBalancer", "loadBalancerClass": "other.example/lb"}, [], False),
        ({"type": "ClusterIP"}, [], False),
        ({"type": "NodePort"}, ["service.kubernetes.io/load-balancer-cleanup"], True),
    ],
)
def test_the_service_view_keeps_services_that_want_or_hold_a_load_balancer(
    spec: dict[str, str], finalizers: list[str], kept: bool
) -> None:
    service = msgspec.convert(
        {
            "metadata": {
                "name": "web",
                "namespace": "shop",
                "resourceVersion": "9",
                "finalizers": finalizers,
            },
            "spec": spec,
        },
        Service,
    )
    projected = project(VIEWS["service"], Topic.SERVICE, service)
    assert (projected is not None) == kept
    if projected is not None:
        assert projected.metadata.resource_version == ""
        assert isinstance(projected, Service)
        assert projected.spec == service.spec


def test_every_controller_reads_only_topics_its_view_has() -> None:
    from pyccm.workers.lifecycle.controller import LifecycleController
    from pyccm.workers.node.controller import NodeController
    from pyccm.workers.route.controller import RouteController
    from pyccm.workers.service.controller import ServiceController

    for name, controller in (
        ("cloud-node", NodeController),
        ("cloud-node-lifecycle", LifecycleController),
        ("route", RouteController),
        ("service", ServiceController),
    ):
        assert set(controller.topics) <= set(VIEWS[name].topics), name


def test_the_manager_caches_a_node_that_projects_as_the_node_itself() -> None:
    full = msgspec.convert(
        NODE_JSON
        | {
            "metadata": NODE_JSON["metadata"]  # type: ignore[operator]
            | {"labels": {"kubernetes.io/hostname": "worker-1", "kubernetes.io/os": "linux"}}
        },
        Node,
    )
    kept = lean_node(full, share=SharedStrings())

    # Every channel publishes the same projection from the cached node as from the full one,
    # and the writer reads the same labels, taints, providerID and resourceVersion.
    for view in VIEWS.values():
        assert project(view, Topic.NODE, kept) == project(view, Topic.NODE, full)
    assert (kept.metadata, kept.spec) == (full.metadata, full.spec)
    # What no projection and no write reads is gone.
    assert [c.type for c in kept.status.conditions] == [c.type for c in full.status.conditions]
    assert all(c.last_heartbeat_time is None and not c.message for c in kept.status.conditions)


def test_cached_nodes_share_the_strings_nodes_repeat_and_the_table_is_bounded() -> None:
    share = SharedStrings()

    def decoded(name: str) -> Node:
        # Decoded from bytes, as the informer does: every string a fresh object.
        meta = {
            "name": name,
            "labels": {"kubernetes.io/os": "linux", "kubernetes.io/hostname": name},
        }
        return msgspec.json.decode(msgspec.json.encode({"metadata": meta}), type=Node)

    first, second = (lean_node(decoded(n), share=share) for n in ("worker-1", "worker-2"))

    (key_1, os_1), (key_2, os_2) = (
        next((k, v) for k, v in n.metadata.labels.items() if v == "linux") for n in (first, second)
    )
    assert key_1 is key_2
    assert os_1 is os_2
    assert second.metadata.labels["kubernetes.io/hostname"] is second.metadata.name
    kept = "".join(["zone-", "a"])
    assert share(kept) is kept
    assert share("".join(["zone-", "a"])) is kept
    for index in range(SharedStrings.LIMIT):
        share(f"unique-{index}")
    late = "".join(["zone-", "b"])
    assert share(late) is late
    assert share("".join(["zone-", "b"])) is not late  # past the limit nothing more is kept
