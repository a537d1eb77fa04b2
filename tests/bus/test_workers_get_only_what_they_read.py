"""Each worker receives its controller's projection: a change nobody reads wakes nobody."""

from __future__ import annotations

from functools import partial

from prometheus_client import REGISTRY

from pyccm.protocol.messages import Topic
from pyccm.protocol.views import (
    Node,
    NodeCondition,
    NodeSpec,
    NodeStatus,
    OwnerMeta,
    Service,
    ServiceSpec,
)
from pyccm.workers.runtime.replica import Obj, Replica
from tests.support.bus import Bus
from tests.support.waiting import eventually


def kubelet_node(
    name: str, rv: int, *, heartbeat: str, labels: dict[str, str] | None = None
) -> Node:
    return Node(
        metadata=OwnerMeta(
            name=name, uid=f"uid-{name}", resource_version=str(rv), labels=labels or {}
        ),
        spec=NodeSpec(provider_id=f"openstack:///{name}", pod_cidr="10.244.0.0/24"),
        status=NodeStatus(
            conditions=(
                NodeCondition(
                    type="Ready",
                    status="True",
                    reason="KubeletReady",
                    message="kubelet is posting ready status",
                    last_heartbeat_time=heartbeat,
                    last_transition_time="2026-11-25T08:00:00Z",
                ),
            )
        ),
    )


def service(name: str, rv: int, *, type_: str, finalizers: tuple[str, ...] = ()) -> Service:
    return Service(
        metadata=OwnerMeta(
            name=name,
            namespace="default",
            uid=f"uid-{name}",
            resource_version=str(rv),
            finalizers=finalizers,
        ),
        spec=ServiceSpec(type=type_),
    )


def received(worker: str, topic: Topic) -> float:
    sample = REGISTRY.get_sample_value(
        "pyccm_bus_deltas_received_total", {"worker": worker, "topic": topic.value}
    )
    return sample or 0.0


def has_node(replica: Replica, name: str) -> bool:
    return replica.node(name) is not None


def changes_seen(replica: Replica) -> list[tuple[str, Obj | None]]:
    seen: list[tuple[str, Obj | None]] = []
    replica.listen(lambda topic, key, old, new: seen.append((key, new)))
    return seen


def test_a_kubelet_heartbeat_reaches_no_worker(bus: Bus) -> None:
    manager = bus.manager()
    manager.cache.nodes.upsert(kubelet_node("a", 1, heartbeat="2026-11-25T09:00:00Z"))
    workers = {
        view: bus.worker(view, view=view, topics=(Topic.NODE,))
        for view in ("cloud-node", "cloud-node-lifecycle", "route", "service")
    }
    for _, replica in workers.values():
        eventually(replica.synced.is_set)
    seen = {view: changes_seen(replica) for view, (_, replica) in workers.items()}
    before = {view: received(view, Topic.NODE) for view in workers}
    for beat in range(1, 11):
        manager.cache.nodes.upsert(
            kubelet_node("a", 1 + beat, heartbeat=f"2026-11-25T09:00:{beat:02}Z")
        )
    # A marker every view sees, published after the heartbeats: once it has arrived, a
    # heartbeat delta would have arrived before it.
    manager.cache.nodes.upsert(kubelet_node("marker", 100, heartbeat="2026-11-25T09:01:00Z"))
    for view, (_, replica) in workers.items():
        eventually(partial(has_node, replica, "marker"))
        assert [key for key, _ in seen[view]] == ["marker"], view
        assert received(view, Topic.NODE) == before[view] + 1, view
    assert len(manager.cache.nodes) == 2
    assert manager.cache.nodes.get("a").metadata.resource_version == "11"  # type: ignore[union-attr]


def test_a_label_change_reaches_only_the_views_that_read_labels(bus: Bus) -> None:
    manager = bus.manager()
    manager.cache.nodes.upsert(kubelet_node("a", 1, heartbeat="t0"))
    _, service_replica = bus.worker("service", view="service", topics=(Topic.NODE,))
    _, route_replica = bus.worker("route", view="route", topics=(Topic.NODE,))
    for replica in (service_replica, route_replica):
        eventually(replica.synced.is_set)
    route_seen = changes_seen(route_replica)
    excluded = {"node.kubernetes.io/exclude-from-external-load-balancers": "true"}
    manager.cache.nodes.upsert(kubelet_node("a", 2, heartbeat="t1", labels=excluded))
    eventually(
        lambda: service_replica.node("a").metadata.labels == excluded  # type: ignore[union-attr]
    )
    manager.cache.nodes.upsert(kubelet_node("marker", 3, heartbeat="t1"))
    eventually(lambda: route_replica.node("marker") is not None)
    assert [key for key, _ in route_seen] == ["marker"]
    # What the route worker holds: no labels, no heartbeat, no resourceVersion.
    projected = route_replica.node("a")
    assert projected is not None
    assert projected.metadata.labels == {}
    assert projected.metadata.resource_version == ""
    assert projected.spec.pod_cidr == "10.244.0.0/24"
    assert projected.status.conditions == ()


def test_the_service_worker_holds_only_services_it_can_act_on(bus: Bus) -> None:
    manager = bus.manager()
    manager.cache.services.upsert(service("web", 1, type_="LoadBalancer"))
    manager.cache.services.upsert(service("internal", 2, type_="ClusterIP"))
    manager.cache.services.upsert(
        service(
            "leaving",
            3,
            type_="ClusterIP",
            finalizers=("service.kubernetes.io/load-balancer-cleanup",),
        )
    )
    _, replica = bus.worker("service", view="service", topics=(Topic.NODE, Topic.SERVICE))
    eventually(replica.synced.is_set)
    assert {s.name for s in replica.services()} == {"web", "leaving"}
    # A LoadBalancer Service turned ClusterIP (no finalizer) leaves the view: to the
    # controller it is deleted, so it cleans up what it made for it.
    seen = changes_seen(replica)
    manager.cache.services.upsert(service("web", 4, type_="ClusterIP"))
    eventually(lambda: replica.service("default/web") is None)
    assert seen == [("default/web", None)]


def test_a_route_worker_never_receives_a_service(bus: Bus) -> None:
    manager = bus.manager()
    _, replica = bus.worker("route", view="route", topics=(Topic.NODE,))
    eventually(replica.synced.is_set)
    for index in range(20):
        manager.cache.services.upsert(service(f"s{index}", index + 1, type_="LoadBalancer"))
    manager.cache.nodes.upsert(kubelet_node("marker", 1, heartbeat="t0"))
    eventually(lambda: replica.node("marker") is not None)
    assert replica.services() == []
    assert received("route", Topic.SERVICE) == 0
