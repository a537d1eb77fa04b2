"""What one reconcile must do, worked out before any cloud call (upstream reconcileNodeRoutes).

Pure functions over the nodes of the replica and the routes the cloud listed: each podCIDR of
each node gets a state (keep, add, update), each owned route is kept or deleted, and once the
cloud calls are done each node's NetworkUnavailable condition follows from its states. Keeping
the decisions apart from the calls lets the tests check every upstream rule without threads.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pyccm.protocol.views import Node, NodeAddress, NodeCondition
from pyccm.provider.interface import Route
from pyccm.workers.route.cidrs import Network, canonical, owned

CONDITION = "NetworkUnavailable"
# Upstream's reasons and messages, word for word: dashboards and alerts match on them.
CREATED = ("False", "RouteCreated", "RouteController created a route")
NOT_CREATED = ("True", "NoRouteCreated", "RouteController failed to create a route")


class CidrState(enum.Enum):
    KEEP = "keep"  # the route exists with the node's current addresses
    ADD = "add"  # no route yet
    UPDATE = "update"  # the route exists but the node's addresses changed: delete, then add


@dataclass(frozen=True)
class Create:
    node: Node
    cidr: str


@dataclass(frozen=True)
class Plan:
    deletes: tuple[Route, ...]
    creates: tuple[Create, ...]
    # node name -> canonical podCIDR -> state, for every node that has podCIDRs or routes.
    states: Mapping[str, Mapping[str, CidrState]]
    # Routes that would be deleted but another cluster's claim on the router covers too
    # (`Route.claimed_by`): they may be that cluster's, so they stay.
    refused: tuple[Route, ...] = ()


def pod_cidrs(node: Node) -> tuple[str, ...]:
    """`spec.podCIDRs`, or the older single `spec.podCIDR` when only that is set."""
    if node.spec.pod_cidrs:
        return node.spec.pod_cidrs
    return (node.spec.pod_cidr,) if node.spec.pod_cidr else ()


def plan_routes(
    *, nodes: Iterable[Node], routes: Iterable[Route], cluster_cidrs: tuple[Network, ...]
) -> Plan:
    routes = tuple(routes)
    by_node = _routes_by_node(routes)
    states: dict[str, dict[str, CidrState]] = {name: {} for name in by_node}
    creates: list[Create] = []
    for node in nodes:
        cidrs = pod_cidrs(node)
        if not cidrs:
            continue
        node_states = states.setdefault(node.name, {})
        existing = by_node.get(node.name, [])
        for cidr in cidrs:
            state = cidr_state(existing, cidr, node.status.addresses)
            node_states[canonical(cidr)] = state
            if state is not CidrState.KEEP:
                creates.append(Create(node=node, cidr=cidr))
    stale = [
        route
        for route in routes
        if owned(route.destination_cidr, cluster_cidrs=cluster_cidrs, route_name=route.name)
        and _must_delete(route, states)
    ]
    return Plan(
        deletes=tuple(r for r in stale if not r.claimed_by),
        creates=tuple(creates),
        states=states,
        refused=tuple(r for r in stale if r.claimed_by),
    )


def _routes_by_node(routes: Iterable[Route]) -> dict[str, list[Route]]:
    # A blackhole's target is its dead next hop, not a node; leaving it out also means a
    # node whose route became a blackhole gets a new one in this same pass.
    grouped: dict[str, list[Route]] = defaultdict(list)
    for route in routes:
        if route.target_node and not route.blackhole:
            grouped[route.target_node].append(route)
    return grouped


def cidr_state(existing: Iterable[Route], cidr: str, addresses: Iterable[NodeAddress]) -> CidrState:
    wanted = canonical(cidr)
    for route in existing:
        if canonical(route.destination_cidr) != wanted:
            continue
        # A provider that fills target_node_addresses opts in to address-change detection
        # (upstream's EnableNodeAddresses); the comparison ignores order.
        if not route.target_node_addresses or set(route.target_node_addresses) == set(addresses):
            return CidrState.KEEP
        return CidrState.UPDATE
    return CidrState.ADD


def _must_delete(route: Route, states: Mapping[str, Mapping[str, CidrState]]) -> bool:
    if route.blackhole:
        return True
    state = states.get(route.target_node, {}).get(canonical(route.destination_cidr))
    return state is None or state is CidrState.UPDATE


def desired_condition(states: Mapping[str, CidrState]) -> tuple[str, str, str]:
    """(status, reason, message) once the creates are done: a node with routes but no
    podCIDRs, or any podCIDR left without its route, has its network unavailable."""
    if states and all(state is CidrState.KEEP for state in states.values()):
        return CREATED
    return NOT_CREATED


def condition_update(
    node: Node, states: Mapping[str, CidrState], *, now: str
) -> NodeCondition | None:
    """The NetworkUnavailable condition to write, or None when status and reason are already
    right (a CNI's own reason is overwritten, as upstream since 1.36)."""
    status, reason, message = desired_condition(states)
    current = node.condition(CONDITION)
    if current is not None and current.status == status and current.reason == reason:
        return None
    return NodeCondition(
        type=CONDITION,
        status=status,
        reason=reason,
        message=message,
        last_heartbeat_time=now,
        last_transition_time=now,
    )
