"""What each controller is sent: the kinds and fields it reads, and nothing else.

The manager's cache holds the full views (`protocol.views`). A worker gets a *projection*
of them, chosen by its controller: only the fields that controller's code reads, and for
the service controller only the Services it can act on. Fields that change all the time
and that no controller reads — the resourceVersion, a kubelet's `lastHeartbeatTime`,
conditions a controller never looks at — are left out, so a kubelet heartbeat changes no
projection: the manager publishes nothing and no worker wakes up. A route worker never
decodes a Service, and a service worker holds 200 LoadBalancer Services, not 10,000.

The manager applies `project` to every change and publishes a delta on a projection's
channel only when the projected object changed; a standalone worker applies the same
function to its own informer's objects, so both transports give a controller the same
replica.

Adding a field a controller reads means adding it here: a controller that reads a field
its projection drops sees the field's default, and the test beside each controller's
fixtures (`tests/protocol/test_projections.py`) pins what each one keeps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import msgspec

from pyccm.flags.load_balancer_class import UNCLASSED, LoadBalancerClasses
from pyccm.protocol.messages import Topic
from pyccm.protocol.views import (
    Node,
    NodeAddress,
    NodeCondition,
    NodeSpec,
    NodeStatus,
    OwnerMeta,
    Service,
    Taint,
)

# The service controller's cleanup finalizer (upstream's name): a Service holding it still
# has a load balancer to delete, whatever its type.
LB_FINALIZER = "service.kubernetes.io/load-balancer-cleanup"


def wants_load_balancer(service: Service, *, classes: LoadBalancerClasses) -> bool:
    """Type LoadBalancer and a `loadBalancerClass` this tree claims (by default none:
    a class means another controller, as upstream)."""
    return service.spec.type == "LoadBalancer" and classes.claims(service.spec.load_balancer_class)


def _conditions(node: Node, kinds: frozenset[str]) -> tuple[NodeCondition, ...]:
    """The conditions of `kinds`, without their timestamps and messages: a heartbeat
    rewrites `lastHeartbeatTime` every few seconds, and no controller reads it. A condition
    that has none (a `lean_node`'s) is itself the result, not a copy."""
    return tuple(
        c if c == _lean_condition(c) else _lean_condition(c)
        for c in node.status.conditions
        if c.type in kinds
    )


def _lean_condition(c: NodeCondition) -> NodeCondition:
    return NodeCondition(type=c.type, status=c.status, reason=c.reason)


class SharedStrings:
    """One copy of each string many objects repeat (label keys, `linux`, `Ready`), for
    at most `LIMIT` distinct strings: past it a string is kept as decoded, so strings
    that never repeat (a cluster's unique label values) cannot make the table grow."""

    LIMIT = 4096

    def __init__(self) -> None:
        self._strings: dict[str, str] = {}

    def __call__(self, text: str) -> str:
        kept = self._strings.get(text)
        if kept is not None:
            return kept
        if len(self._strings) < self.LIMIT:
            return self._strings.setdefault(text, text)
        return text


def lean_node(node: Node, *, share: Callable[[str], str]) -> Node:
    """A Node as a cache keeps it (the manager's cache of full Nodes, a worker's replica of
    its projection): every field but the conditions' messages and times (no projection
    and no write reads them), with the strings that Nodes repeat (label and annotation keys
    and values, condition, taint and address kinds) one copy each (`share`); a label whose
    value is the node's name holds the name itself. Equal to the node for every projection
    (`python -m bench.manager_parts` gives the bytes per node)."""
    meta = node.metadata
    name = meta.name

    def shared(items: dict[str, str]) -> dict[str, str]:
        return {share(k): name if v == name else share(v) for k, v in items.items()}

    spec = node.spec
    status = node.status
    return Node(
        metadata=msgspec.structs.replace(
            meta, labels=shared(meta.labels), annotations=shared(meta.annotations)
        ),
        spec=msgspec.structs.replace(
            spec,
            taints=tuple(
                Taint(
                    key=share(t.key),
                    effect=share(t.effect),
                    value=share(t.value),
                    time_added=t.time_added,
                )
                for t in spec.taints
            ),
        ),
        status=NodeStatus(
            addresses=tuple(
                NodeAddress(type=share(a.type), address=a.address) for a in status.addresses
            ),
            conditions=tuple(
                NodeCondition(type=share(c.type), status=share(c.status), reason=share(c.reason))
                for c in status.conditions
            ),
        ),
    )


def cloud_node_node(node: Node) -> Node:
    """Initialization and address sync: labels, the node-ip annotation, taints,
    providerID and addresses (and the creation time, for the initialization delays)."""
    meta = node.metadata
    return Node(
        metadata=OwnerMeta(
            name=meta.name,
            uid=meta.uid,
            # Upstream's node_controller_* delays run from it; it never changes, so it
            # costs no delta.
            creation_timestamp=meta.creation_timestamp,
            labels=meta.labels,
            annotations=meta.annotations,
        ),
        spec=NodeSpec(provider_id=node.spec.provider_id, taints=node.spec.taints),
        status=NodeStatus(addresses=node.status.addresses),
    )


def lifecycle_node(node: Node) -> Node:
    """Readiness (status only), the shutdown taint, and what finds the server."""
    meta = node.metadata
    return Node(
        metadata=OwnerMeta(name=meta.name, uid=meta.uid),
        spec=NodeSpec(provider_id=node.spec.provider_id, taints=node.spec.taints),
        status=NodeStatus(conditions=_conditions(node, frozenset({"Ready"}))),
    )


def route_node(node: Node) -> Node:
    """Pod CIDRs, the addresses a next hop is taken from, and the NetworkUnavailable
    condition the route controller owns."""
    meta = node.metadata
    spec = node.spec
    return Node(
        metadata=OwnerMeta(name=meta.name, uid=meta.uid),
        spec=NodeSpec(
            provider_id=spec.provider_id, pod_cidr=spec.pod_cidr, pod_cidrs=spec.pod_cidrs
        ),
        status=NodeStatus(
            addresses=node.status.addresses,
            conditions=_conditions(node, frozenset({"NetworkUnavailable"})),
        ),
    )


def service_node(node: Node) -> Node:
    """What decides a backend (labels, taints, deletion) and its member address."""
    meta = node.metadata
    return Node(
        metadata=OwnerMeta(
            name=meta.name,
            uid=meta.uid,
            labels=meta.labels,
            deletion_timestamp=meta.deletion_timestamp,
        ),
        spec=NodeSpec(provider_id=node.spec.provider_id, taints=node.spec.taints),
        status=NodeStatus(addresses=node.status.addresses),
    )


def service_service(
    service: Service, *, classes: LoadBalancerClasses = UNCLASSED
) -> Service | None:
    """A Service the service controller can act on: one that wants a load balancer from
    this tree (`classes`), or one that still holds our finalizer (its load balancer is left
    to delete). Any other Service is absent from the replica, as if deleted: a Service that
    stops wanting a load balancer without our finalizer looks deleted to the controller,
    which then deletes what it created, as upstream does for a deleted Service."""
    wanted = wants_load_balancer(service, classes=classes)
    if not (wanted or LB_FINALIZER in service.metadata.finalizers):
        return None
    meta = service.metadata
    # Everything but the resourceVersion: a Service's own fields are what the controller
    # compares, and the status write it asked for must reach it.
    return Service(
        metadata=OwnerMeta(
            name=meta.name,
            namespace=meta.namespace,
            uid=meta.uid,
            generation=meta.generation,
            creation_timestamp=meta.creation_timestamp,
            deletion_timestamp=meta.deletion_timestamp,
            labels=meta.labels,
            annotations=meta.annotations,
            finalizers=meta.finalizers,
        ),
        spec=service.spec,
        status=service.status,
    )


NodeProjection = Callable[[Node], Node | None]
ServiceProjection = Callable[[Service], Service | None]


@dataclass(frozen=True)
class View:
    """What one controller receives: a projection per kind it reads (None: not sent)."""

    node: NodeProjection | None = None
    service: ServiceProjection | None = None

    @property
    def topics(self) -> tuple[Topic, ...]:
        return tuple(
            topic
            for topic, projection in ((Topic.NODE, self.node), (Topic.SERVICE, self.service))
            if projection is not None
        )


def views(classes: LoadBalancerClasses = UNCLASSED) -> dict[str, View]:
    """Every controller's view, keyed by the controllers' canonical names
    (protocol.controllers.CONTROLLERS); the service view keeps the Services of `classes`."""
    return {
        "cloud-node": View(node=cloud_node_node),
        "cloud-node-lifecycle": View(node=lifecycle_node),
        "route": View(node=route_node),
        "service": View(node=service_node, service=partial(service_service, classes=classes)),
    }


# Upstream's claim: only Services without a class.
VIEWS: dict[str, View] = views()


def channel(view: str, topic: Topic) -> str:
    """The PUB/SUB channel of one view's topic, e.g. `route:node`.

    ZeroMQ subscriptions match prefixes; no channel is a prefix of another, or of
    `control` (a test checks it), so a worker receives exactly its own channels.
    """
    return f"{view}:{topic.value}"


def project(view: View, topic: Topic, obj: Node | Service) -> Node | Service | None:
    """`obj` as `view` sees it; None when the view does not include it."""
    if topic is Topic.NODE and view.node is not None and isinstance(obj, Node):
        return view.node(obj)
    if topic is Topic.SERVICE and view.service is not None and isinstance(obj, Service):
        return view.service(obj)
    return None
