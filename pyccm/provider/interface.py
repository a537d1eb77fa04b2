"""The cloud interface the controllers program against: one Protocol per capability.

It mirrors upstream's `InstancesV2`, `LoadBalancer` and `Routes` (k8s.io/cloud-provider
`cloud.go`) and their error semantics (`provider.errors`), in Python terms:

* inputs are the lean, frozen `Node` / `Service` views the manager publishes on the bus
  (`protocol.views`), never raw dicts or client models;
* outputs are frozen msgspec Structs, so a result can cross the bus unchanged;
* "not supported" is a capability accessor returning None, "gone" / "elsewhere" /
  "call again later" are sentinel exceptions, and everything else is a `CloudError`;
* a provider never writes to Kubernetes: what upstream's OpenStack provider patches
  itself (the `load-balancer-id` / `load-balancer-address` annotations, Warning events)
  comes back in the outcome for the manager to apply.

All calls are blocking: workers call them from sync threads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, NewType, Protocol, runtime_checkable

import msgspec

from pyccm.protocol.views import LoadBalancerIngress, Node, NodeAddress, Service

ProviderId = NewType("ProviderId", str)
"""A node's `spec.providerID`, e.g. `openstack:///<server uuid>`."""

EventType = Literal["Normal", "Warning"]

NodeSelector = tuple[tuple[str, str | None], ...]
"""The labels a node needs to back a Service's load balancer: every term, `(key, value)`
that label with that value, `(key, None)` that label with any value; empty: every node."""


def selects(selector: NodeSelector, labels: Mapping[str, str]) -> bool:
    """Whether a node with `labels` passes `selector`."""
    return all(key in labels and (value is None or labels[key] == value) for key, value in selector)


class _Outcome(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    """Base of every provider result: frozen and msgspec-serialisable."""


class ProviderEvent(_Outcome, frozen=True):
    """An event for the manager to record on the object the call was about."""

    type: EventType
    reason: str
    message: str


class InstanceMetadata(_Outcome, frozen=True):
    """What upstream's `InstanceMetadata` returns; the node controller turns it into the
    providerID, the instance-type / zone / region labels and the node's addresses."""

    provider_id: ProviderId
    instance_type: str
    node_addresses: tuple[NodeAddress, ...]
    zone: str = ""
    region: str = ""
    additional_labels: dict[str, str] = {}


class LoadBalancerOutcome(_Outcome, frozen=True):
    """The result of ensuring a Service's load balancer.

    `ingress` becomes `status.loadBalancer.ingress`; `annotations_to_set` are Service
    annotations the manager patches (upstream's `load-balancer-id` and
    `load-balancer-address`); `events` are recorded on the Service.
    """

    ingress: tuple[LoadBalancerIngress, ...]
    annotations_to_set: dict[str, str] = {}
    events: tuple[ProviderEvent, ...] = ()


class PlannedChange(_Outcome, frozen=True):
    """One cloud write an ensure would make now (`LoadBalancers.plan`)."""

    action: Literal["create", "update", "delete"]
    kind: str  # "load balancer", "listener", "pool", "members", "health monitor", ...
    target: str  # the id of what is updated or deleted, the name of what is created
    # What a create would send, or the fields an update would change and their new values.
    fields: dict[str, Any] = {}


class LoadBalancerPlan(_Outcome, frozen=True):
    """What `ensure` would do to the cloud for one Service, computed without writing.

    `changes` are the writes in the order an ensure would make them (over several syncs
    where the cloud allows one write at a time); `waits` says why an ensure would stop
    there for now (a load balancer still provisioning, the one just created)."""

    service: str
    changes: tuple[PlannedChange, ...] = ()
    ingress: tuple[LoadBalancerIngress, ...] = ()
    events: tuple[ProviderEvent, ...] = ()
    waits: str = ""


OwnedKind = Literal["load balancer", "listener", "floating IP", "security group", "route"]


class OwnedResource(_Outcome, frozen=True):
    """A cloud resource this cluster owns (its cluster id is in its tags or description),
    with the Services it was made for, so that a caller holding the live Services can tell
    an orphan (`pyccm gc`, the service worker's orphan scan)."""

    kind: OwnedKind
    id: str
    name: str = ""
    # `namespace/name` of the Services it serves (a shared load balancer: several).
    services: tuple[str, ...] = ()
    # The UID of the Service it was made for, where only that is known (legacy names,
    # security groups).
    service_uid: str = ""
    # What it hangs off: a listener's load balancer, a route's router.
    parent: str = ""
    detail: str = ""


class Route(_Outcome, frozen=True):
    """A pod-network route on the cloud router.

    `target_node_addresses` carries the target Node's addresses (upstream's
    `TargetNodeAddresses`): the provider takes the next hop from them, so it needs no
    node informer of its own. `blackhole` marks a route whose next hop no node owns.
    """

    name: str
    target_node: str
    destination_cidr: str
    blackhole: bool = False
    target_node_addresses: tuple[NodeAddress, ...] = ()
    # The other clusters whose claim on the router (`RouteClaims`) also covers this
    # destination: the route may be theirs, so it is never deleted.
    claimed_by: tuple[str, ...] = ()


class InstanceListing(_Outcome, frozen=True):
    """What one listing of the cloud's servers says about a set of nodes (no upstream
    counterpart: upstream's lifecycle loop asks about each node with its own calls).

    A node in `found` has a server (`instance_exists` would say True); `shutdown` holds those
    of them whose server is shut down. A node in neither is **not** known to be gone: the
    listing may have raced with a create, or the node's name may match several servers, so
    the caller asks `instance_exists` about it before acting.
    """

    found: frozenset[str] = frozenset()
    shutdown: frozenset[str] = frozenset()


class Instances(Protocol):
    """Upstream `InstancesV2`. Each call looks at `spec.providerID` first, then the name."""

    def instance_exists(self, *, node: Node) -> bool:
        """False only when the server is definitely gone (the Node may then be deleted)."""
        ...

    def instance_shutdown(self, *, node: Node) -> bool:
        """True when the server is stopped (the Node gets the shutdown taint)."""
        ...

    def instance_metadata(self, *, node: Node) -> InstanceMetadata:
        """Raises `InstanceNotFound` when there is no server, `AmbiguousInstance` when the
        name matches several."""
        ...

    def instance_listing(self, *, nodes: Sequence[Node]) -> InstanceListing:
        """Which of `nodes` have a server, and which of those are shut down, from one
        (paged) listing of the servers rather than calls per node."""
        ...

    def instances_metadata(
        self,
        *,
        nodes: Sequence[Node],
        deliver: Callable[[dict[str, InstanceMetadata]], None] | None = None,
    ) -> dict[str, InstanceMetadata]:
        """`instance_metadata` of many nodes, by node name, from a few calls for all of them
        rather than calls per node (no upstream counterpart). A node left out is not known
        to be gone: the caller asks `instance_metadata` about it alone. Answers also go to
        `deliver`, a part at a time, as soon as the calls behind each part have landed."""
        ...


class LoadBalancers(Protocol):
    """Upstream `LoadBalancer`. Every call is idempotent and safe to repeat after a crash."""

    def get(self, *, service: Service) -> tuple[LoadBalancerIngress, ...] | None:
        """The current ingress of the Service's load balancer, or None when it has none."""
        ...

    def ensure(self, *, service: Service, nodes: Sequence[Node]) -> LoadBalancerOutcome:
        """Create or update. Raises `RetryAfter` while the load balancer is provisioning,
        `ImplementedElsewhere` when another controller owns the Service."""
        ...

    def update(self, *, service: Service, nodes: Sequence[Node]) -> tuple[ProviderEvent, ...]:
        """Bring the backends (members, monitors) in line with `nodes`; nothing else."""
        ...

    def ensure_deleted(self, *, service: Service) -> tuple[ProviderEvent, ...]:
        """Delete every part of the load balancer; succeeds when it is already gone."""
        ...

    def node_selector(self, *, service: Service) -> NodeSelector:
        """Which of the nodes `ensure` and `update` are given may back the Service's load
        balancer (no upstream counterpart). Pure and cheap: no cloud call, never raises.
        The service controller re-syncs exactly the Services whose selection a node's
        label change alters (kubernetes/kubernetes#133165)."""
        ...

    def plan(self, *, service: Service, nodes: Sequence[Node]) -> LoadBalancerPlan:
        """What `ensure` would write to the cloud now, computed by the same code with every
        write recorded instead of sent: reads only."""
        ...

    def owned(self) -> tuple[OwnedResource, ...]:
        """Every load balancer, listener on a shared one, floating IP and security group
        that carries this cluster's id (reads only). `CloudError` without a cluster id."""
        ...

    def delete_owned(self, resource: OwnedResource) -> None:
        """Delete `resource` (from `owned`) after checking again that this cluster owns
        it; `RetryAfter` while it needs another call (a load balancer still busy)."""
        ...


class RouteFailure(_Outcome, frozen=True):
    """A route of a batch that could not be created or deleted, and why."""

    route: Route
    error: str
    # Set when the router refused the route because it holds as many routes as it may
    # (Neutron's `router_route` quota, formerly `max_routes`): that maximum.
    route_limit: int | None = None


class Routes(Protocol):
    """Upstream `Routes`, for the routes of this cluster on the cloud router.

    The controller uses the batch calls (`create_many`, `delete_many`): a burst of node
    joins is one router update, not one per node. `create` and `delete` are upstream's
    per-route calls, kept for callers that handle one route.
    """

    def list(self, *, nodes: Sequence[Node]) -> tuple[Route, ...]:
        """Every route on the router; `nodes` maps next hops back to node names."""
        ...

    def create(self, *, name_hint: str, route: Route) -> None:
        """Add `route` (idempotent). `name_hint` is the node UID, as upstream passes it."""
        ...

    def delete(self, *, route: Route) -> None:
        """Remove a route returned by `list` (succeeds when it is already gone)."""
        ...

    def create_many(self, *, routes: Sequence[tuple[str, Route]]) -> tuple[RouteFailure, ...]:
        """Add every `(name_hint, route)` (idempotent) in as few cloud calls as the cloud
        allows; the routes that could not be added, each with its reason. A failure of one
        route never stops the others."""
        ...

    def delete_many(self, *, routes: Sequence[Route]) -> tuple[RouteFailure, ...]:
        """Remove every route (as returned by `list`; one already gone counts as removed)
        in as few cloud calls as the cloud allows; the routes that could not be removed."""
        ...


@runtime_checkable
class RouteClaims(Routes, Protocol):
    """Routes whose router records which cluster routes which CIDR through it (optional).

    Router routes carry no tags, so two clusters sharing a router
    (kubernetes/cloud-provider-openstack#3102) are told apart by a claim on the router
    itself; `list` then fills each route's `claimed_by` from the other clusters' claims."""

    def claim(self, *, cluster_cidrs: Sequence[str]) -> None:
        """Record that this cluster routes `cluster_cidrs` through the router (idempotent,
        cheap once done; nothing without a cluster id). Raises `ProviderError`: the caller
        tries again later, with backoff."""
        ...


class OwnedRoute(_Outcome, frozen=True):
    """A route inside a CIDR this cluster claims on a router (`pyccm gc`)."""

    router_id: str
    destination: str
    nexthop: str
    # The other clusters whose claims also cover it: never deleted.
    claimed_by: tuple[str, ...] = ()


class ClaimedRouter(_Outcome, frozen=True):
    """A router that carries this cluster's claims, and the routes inside them."""

    id: str
    name: str
    cidrs: tuple[str, ...]
    routes: tuple[OwnedRoute, ...] = ()


class OwnedRouteFailure(_Outcome, frozen=True):
    route: OwnedRoute
    error: str


@runtime_checkable
class RouteOwnership(Protocol):
    """This cluster's routes on every router that carries its claims, for `pyccm gc`:
    found by the claims, not by `[Route] router-id`, so a router left behind by a change
    of router is found too."""

    def claimed_routers(self) -> tuple[ClaimedRouter, ...]: ...

    def delete_routes(
        self, router_id: str, routes: Sequence[OwnedRoute]
    ) -> tuple[OwnedRouteFailure, ...]:
        """Remove `routes` from the router in as few calls as the cloud allows, after
        reading the router again: a route no claim of this cluster covers any more, or
        that another cluster's claim now covers, is refused (a failure), never removed."""
        ...

    def release(self, router_id: str) -> tuple[str, ...]:
        """Remove this cluster's claims from the router (the cluster is gone); the tags
        removed. Raises `CloudError` while a route only this cluster claims is left."""
        ...


class Cloud(Protocol):
    """A provider instance: says which capabilities it offers (None = not offered)."""

    @property
    def name(self) -> str: ...

    def instances(self) -> Instances | None: ...

    def load_balancers(self) -> LoadBalancers | None: ...

    def routes(self) -> Routes | None: ...

    def close(self) -> None:
        """Release connections; the process is about to exit."""
        ...


@runtime_checkable
class RouteOwningCloud(Cloud, Protocol):
    """A cloud that can find this cluster's routes by their claims (`pyccm gc`)."""

    def route_ownership(self) -> RouteOwnership | None:
        """None when the cloud has no routes at all (no router extension)."""
        ...


Capability = Literal["instances", "load_balancers", "routes"]
"""A capability by the name of its `Cloud` accessor."""


class ConfigChange(_Outcome, frozen=True):
    """What one reload of the provider's configuration put in force (`ReloadableCloud`)."""

    # The file the provider's configuration is read from (`--cloud-config`).
    source: str = ""
    # What changed, in the configuration's own words (`cloud.conf` sections); empty when
    # the files changed but no setting did (a comment, the order of keys).
    sections: tuple[str, ...] = ()
    # The capabilities whose settings changed: the controllers using them look at their
    # objects again at once, instead of at their next periodic pass.
    capabilities: frozenset[Capability] = frozenset()
    # Settings read only when the process starts: changed in the file, in force after
    # the next restart (each names its section and key).
    need_restart: tuple[str, ...] = ()


@runtime_checkable
class ReloadableCloud(Cloud, Protocol):
    """A cloud that can re-read its configuration while it runs (optional: a worker polls
    only clouds that offer it)."""

    def reload_config(self) -> ConfigChange | None:
        """Re-read the configuration if its files changed since the last call.

        None: their content is what was last read, nothing to do. Else the new settings
        are in force for every call made from now on. Raises `ConfigError` (one line, no
        value quoted) for a file that cannot be used; the settings in force stay, and the
        same bad content is not reported again."""
        ...
