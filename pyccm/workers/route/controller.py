"""route: upstream's node-route-controller, watch-driven with a periodic safety net.

What it does, step by step: pyccm/workers/route/README.md#what-it-does.

There is one key, `routes`: every reconcile lists the router's routes once and compares them
with every node's podCIDRs, so per-node keys would only multiply the list calls. The key is
enqueued when a node is added or deleted, when a node's podCIDRs or addresses change (never
for the heartbeats that change a node's resourceVersion every few seconds), and every
`--route-reconciliation-period` (upstream's timer, kept as the clean-up for anything a watch
missed). Reconciles start at most once per `min_interval`: a key that comes back sooner gets
`RetryAfter` for the rest of the interval, and the queue folds every change that arrives in
the meantime into that one run. A node change is routed within about a second; churn costs at
most one route listing per second.

Inside a reconcile the plan is one set difference of the nodes' pod CIDRs and the router's
routes, and the cloud gets it as two batches: every delete in one `delete_many`, then every
create in one `create_many` (so an update's delete can never remove the route its create just
wrote). The provider turns each batch into as few router calls as the cloud allows, where
upstream makes one call per route on up to 200 goroutines. Nothing is O(routes) per node
event: a burst of node changes is folded into one reconcile, and the reconcile is linear in
nodes and routes. A failed route is logged and retried by the next reconcile; only a failed
listing fails the sync (the runner backs off). The sync returns the Warning events and the
NetworkUnavailable conditions for the manager to write.

At the router's route limit (Neutron's `max_routes`) the routes that fit are kept; each node
left without its route gets a Warning `FailedToCreateRoute` naming the limit (again at most
every `limit_warning_interval`, so 5,000 refused nodes are not 5,000 events per reconcile),
`pyccm_route_limit_reached` goes to 1 and `pyccm_routes_over_limit` counts the refused
routes, and the sync fails so the runner backs off with the route limiter (one retry per
10 s). The reconciles that node changes bring meanwhile do not ask the router again: their
creates wait `limit_retry_interval` (10 s) unless a delete in that reconcile made room, so a
full router costs one refused call per 10 s however fast nodes churn.

Two clusters may share a router (kubernetes/cloud-provider-openstack#3102). Router routes carry no
tags, so each reconcile first makes sure the router carries this cluster's claim of its CIDRs
(`RouteClaims.claim`: the tag `pyccm-routes:<cluster-id>=<cidr>`, one call per tag and process; a
failure is retried with backoff, 1 s doubling to 5 min, and never stops the routing). A route this
reconcile would delete but another cluster's claim covers as well (an overlapping CIDR) is left
alone: a Warning `RouteClaimedByAnotherCluster` on the Node whose podCIDR it is (at most every
`limit_warning_interval`), or, without such a Node, one log line per route;
`pyccm_routes_claimed_by_other_clusters` counts them. A router with no claim at all is upstream's,
and routes on it are handled as before (migration).
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client import Counter, Gauge

from pyccm.pacing import Backoff
from pyccm.protocol.messages import Action, PatchNodeStatus, RecordEvent, Topic
from pyccm.protocol.views import Node
from pyccm.provider.errors import RetryAfter
from pyccm.provider.interface import Route, RouteClaims, RouteFailure, Routes
from pyccm.workers.route.cidrs import Network, canonical
from pyccm.workers.route.plan import CidrState, Create, condition_update, plan_routes, pod_cidrs
from pyccm.workers.runtime.clock import MONOTONIC, Clock
from pyccm.workers.runtime.controller import Lane, Obj, Periodic, SyncFailed, node_ref
from pyccm.workers.runtime.ratelimit import RateLimiter, route_controller_rate_limiter
from pyccm.workers.runtime.replica import Replica

log = logging.getLogger(__name__)

KEY = "routes"
# Upstream's event source component for this controller.
COMPONENT = "route_controller"

ROUTE_SYNCS = Counter(
    "route_controller_route_sync_total",
    "Reconciles of the node routes by trigger (node_change, periodic) and outcome (changed:"
    " a route was created or deleted, noop, error) (upstream's metric).",
    ["trigger", "outcome"],
)
# Upstream's label values.
NODE_CHANGE, PERIODIC = "node_change", "periodic"
CHANGED, NOOP, ERROR = "changed", "noop", "error"
# No upstream counterpart: upstream logs and warns per route and has no limit metric.
ROUTE_LIMIT_REACHED = Gauge(
    "pyccm_route_limit_reached",
    "1 when the last reconcile found the router at its route limit (Neutron max_routes).",
    multiprocess_mode="livemax",
)
ROUTES_CLAIMED_ELSEWHERE = Gauge(
    "pyccm_routes_claimed_by_other_clusters",
    "Routes inside --cluster-cidr the last reconcile left alone instead of deleting: another"
    " cluster's pyccm-routes claim on the router covers them too.",
    multiprocess_mode="livemax",
)
ROUTER_CLAIM_FAILURES = Counter(
    "pyccm_router_claim_failures",
    "Failed attempts to tag the router with this cluster's pyccm-routes claim.",
)
ROUTES_OVER_LIMIT = Gauge(
    "pyccm_routes_over_limit",
    "Pod routes the router refused for its route limit in the last reconcile.",
    multiprocess_mode="livemax",
)


@dataclass(frozen=True)
class RouteSettings:
    # Parsed --cluster-cidr (parse_cluster_cidrs): only routes inside these are ours.
    cluster_cidrs: tuple[Network, ...]
    # Upstream --route-reconciliation-period: the safety-net full reconcile.
    reconciliation_period: float = 10.0
    # At most one reconcile per second: a change is routed quickly, churn costs one list/s.
    min_interval: float = 1.0
    # A node refused for the route limit is warned again after this long, not every reconcile:
    # upstream's event spam filter lets one event per object through every 5 minutes.
    limit_warning_interval: float = 300.0
    # Once the router refused routes for its limit, creates wait this long before trying
    # again (unless a delete made room): the route limiter's 10 s, whatever the node churn.
    limit_retry_interval: float = 10.0
    # A failed claim of the router (its tag) is tried again after this long, doubling up to
    # `claim_retry_max`: a refused tag (a policy, Neutron's 50 tags) is not hammered.
    claim_retry_initial: float = 1.0
    claim_retry_max: float = 300.0


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class RouteController:
    name = "route"
    queue_name = "Routes"
    topics: tuple[Topic, ...] = (Topic.NODE,)
    component = COMPONENT
    lanes: tuple[Lane, ...] = ()

    def __init__(
        self,
        *,
        replica: Replica,
        routes: Routes,
        settings: RouteSettings,
        clock: Clock = MONOTONIC,
        wall_clock: Callable[[], datetime.datetime] = utc_now,
    ) -> None:
        self._replica = replica
        self._routes = routes
        self._settings = settings
        self._clock = clock
        self._wall_clock = wall_clock
        self._last_start: float | None = None
        self._start_lock = threading.Lock()
        # node name -> when it was last warned that the route limit left it without a route.
        self._limit_warned: dict[str, float] = {}
        # The router's route limit since it last refused routes (None: not full), and when
        # creates may try again.
        self._limit: int | None = None
        self._retry_limit_at = 0.0
        # The router claim's backoff: next try not before `_claim_at`.
        self._claim_at = 0.0
        self._claim_backoff = Backoff(
            base=settings.claim_retry_initial, cap=settings.claim_retry_max
        )
        # (node name, CIDR) -> when last warned that another cluster claims its route;
        # routes without a node, logged once each.
        self._claim_warned: dict[tuple[str, str], float] = {}
        self._claim_logged: set[tuple[str, str]] = set()
        # A node change asked for a reconcile that has not yet run to its end: the next
        # reconcile's `trigger` is node_change (periodic otherwise).
        self._node_changed = False
        self._trigger_lock = threading.Lock()

    def rate_limiter(self) -> RateLimiter[Hashable]:
        # Only a failed listing goes through it: upstream's one retry per 10 s, capped at 10 s.
        return route_controller_rate_limiter(clock=self._clock)

    def keys_for(self, topic: Topic, key: str, old: Obj | None, new: Obj | None) -> Iterable[str]:
        if topic is not Topic.NODE:
            return ()
        changed = old is None or new is None
        if isinstance(old, Node) and isinstance(new, Node) and routing_changed(old, new):
            changed = True
        if not changed:
            return ()
        self._mark_node_change()
        return (KEY,)

    def _mark_node_change(self) -> None:
        with self._trigger_lock:
            self._node_changed = True

    def _take_trigger(self) -> str:
        with self._trigger_lock:
            changed, self._node_changed = self._node_changed, False
        return NODE_CHANGE if changed else PERIODIC

    def periodics(self, enqueue: Callable[[str], None]) -> list[Periodic]:
        return [
            Periodic(
                name="reconcile",
                period=self._settings.reconciliation_period,
                run=lambda: enqueue(KEY),
                wakes_on=frozenset({"routes"}),  # a reloaded [Route] router-id
            )
        ]

    def sync(self, key: str) -> tuple[Action, ...]:
        if key != KEY:
            return ()
        self._claim_start()
        # Taken before the replica is read: a change after this asks for another reconcile.
        trigger = self._take_trigger()
        try:
            self._claim_router()
            nodes = self._replica.nodes()
            # A listing error propagates: the runner backs the key off and tries again.
            routes = self._routes.list(nodes=nodes)
            actions, changed = self._reconcile(nodes, routes)
        except Exception:
            ROUTE_SYNCS.labels(trigger=trigger, outcome=ERROR).inc()
            # The retry finishes what the node change asked for.
            if trigger == NODE_CHANGE:
                self._mark_node_change()
            raise
        ROUTE_SYNCS.labels(trigger=trigger, outcome=CHANGED if changed else NOOP).inc()
        return actions

    def _claim_start(self) -> None:
        """Record this reconcile's start, or raise RetryAfter for the rest of min_interval."""
        with self._start_lock:
            now = self._clock.now()
            if self._last_start is not None:
                remaining = self._last_start + self._settings.min_interval - now
                if remaining > 0:
                    raise RetryAfter("the last reconcile started too recently", delay=remaining)
            self._last_start = now

    def _reconcile(
        self, nodes: Sequence[Node], routes: Sequence[Route]
    ) -> tuple[tuple[Action, ...], bool]:
        """The actions, and whether a route was created or deleted."""
        plan = plan_routes(nodes=nodes, routes=routes, cluster_cidrs=self._settings.cluster_cidrs)
        refusals = self._refused(plan.refused, nodes)
        freed = self._delete(plan.deletes)
        failures = self._create(plan.creates, freed=freed)
        created = len(failures) < len(plan.creates)
        states = {name: dict(cidrs) for name, cidrs in plan.states.items()}
        events: list[Action] = []
        over_limit: list[RouteFailure] = []
        for create in plan.creates:
            failure = failures.get((create.node.name, create.cidr))
            if failure is None:
                states[create.node.name][canonical(create.cidr)] = CidrState.KEEP
                continue
            if failure.failure.route_limit is not None:
                over_limit.append(failure.failure)
            if self._should_warn(create, failure.failure):
                events.append(failure.event)
        actions = (*refusals, *events, *self._conditions(nodes, states))
        self._record_limit(over_limit)
        if over_limit:
            # Back off with the route limiter: the router will not take more until routes
            # go or its limit is raised, and a retry at every node change would only repeat
            # the refusal.
            raise SyncFailed(
                f"the router refused {len(over_limit)} route(s) for its route limit",
                actions=actions,
            )
        return actions, freed or created

    def _claim_router(self) -> None:
        """Tag the router with this cluster's claim, unless backing off from a failure."""
        if not isinstance(self._routes, RouteClaims):
            return
        now = self._clock.now()
        if now < self._claim_at:
            return
        cidrs = tuple(c.compressed for c in self._settings.cluster_cidrs)
        try:
            self._routes.claim(cluster_cidrs=cidrs)
        except Exception as error:  # a cloud error or a provider bug: routing goes on
            ROUTER_CLAIM_FAILURES.inc()
            delay = self._claim_backoff.next()
            self._claim_at = now + delay
            log.warning(
                "could not tag the router with this cluster's claim of %s: %s; next try in %s",
                ",".join(cidrs),
                error,
                go_duration(delay),
            )
            return
        self._claim_backoff.reset()

    def _refused(self, routes: Sequence[Route], nodes: Sequence[Node]) -> list[Action]:
        """The routes left alone for another cluster's claim: a Warning on the Node whose
        podCIDR each is, else a log line (once per route), and the gauge."""
        ROUTES_CLAIMED_ELSEWHERE.set(len(routes))
        by_cidr = {canonical(c): node for node in nodes for c in pod_cidrs(node)}
        now = self._clock.now()
        events: list[Action] = []
        for route in routes:
            message = (
                f"Route {route.destination_cidr} via {route.target_node} not deleted: the"
                f" router also carries the claim of cluster {', '.join(route.claimed_by)}"
                " on it (an overlapping cluster CIDR), so the route may be theirs"
            )
            node = by_cidr.get(canonical(route.destination_cidr))
            if node is None:
                key = (route.target_node, route.destination_cidr)
                if key not in self._claim_logged:
                    self._claim_logged.add(key)
                    log.warning("%s", message)
                continue
            last = self._claim_warned.get((node.name, route.destination_cidr))
            if last is not None and now - last < self._settings.limit_warning_interval:
                continue
            self._claim_warned[(node.name, route.destination_cidr)] = now
            log.warning("%s", message)
            events.append(
                RecordEvent(
                    regarding=node_ref(node),
                    reason="RouteClaimedByAnotherCluster",
                    message=message,
                    type="Warning",
                    component=COMPONENT,
                )
            )
        return events

    def _delete(self, routes: Sequence[Route]) -> bool:
        """Delete every route in one batch; whether any went (room for creates)."""
        if not routes:
            return False
        started = self._clock.now()
        for route in routes:
            log.info("deleting route %s %s", route.name, route.destination_cidr)
        try:
            failures = self._routes.delete_many(routes=routes)
        except Exception as error:
            # Even a provider bug must not stop the creates; the next reconcile tries again.
            failures = tuple(RouteFailure(route=r, error=str(error)) for r in routes)
        elapsed = go_duration(self._clock.now() - started)
        for failure in failures:
            log.error(
                "could not delete route %s %s after %s: %s",
                failure.route.name,
                failure.route.destination_cidr,
                elapsed,
                failure.error,
            )
        return len(failures) < len(routes)

    def _create(self, creates: Sequence[Create], *, freed: bool) -> dict[tuple[str, str], _Failed]:
        """Create every route in one batch; the failed ones by (node name, CIDR)."""
        if not creates:
            return {}
        started = self._clock.now()
        batch = []
        for create in creates:
            hint = create.node.metadata.uid
            log.info(
                "creating route for node %s %s with hint %s", create.node.name, create.cidr, hint
            )
            route = Route(
                name="",
                target_node=create.node.name,
                destination_cidr=create.cidr,
                target_node_addresses=create.node.status.addresses,
            )
            batch.append((hint, route))
        failures = self._held_back(batch, freed=freed)
        if failures is None:
            failures = self._create_many(batch)
        elapsed = go_duration(self._clock.now() - started)
        nodes = {create.node.name: create.node for create in creates}
        failed = {}
        for failure in failures:
            route = failure.route
            node = nodes[route.target_node]
            message = (
                f"Could not create route {node.metadata.uid} {route.destination_cidr}"
                f" for node {node.name} after {elapsed}: {failure.error}"
            )
            log.error("%s", message)
            event = RecordEvent(
                regarding=node_ref(node),
                reason="FailedToCreateRoute",
                message=message,
                type="Warning",
                component=COMPONENT,
            )
            failed[(node.name, route.destination_cidr)] = _Failed(failure=failure, event=event)
        return failed

    def _create_many(self, batch: Sequence[tuple[str, Route]]) -> tuple[RouteFailure, ...]:
        try:
            failures = self._routes.create_many(routes=batch)
        except Exception as error:
            # Even a provider bug fails only this reconcile's creates.
            return tuple(RouteFailure(route=r, error=str(error)) for _, r in batch)
        limits = [f.route_limit for f in failures if f.route_limit is not None]
        if limits:
            self._limit = max(limits)
            self._retry_limit_at = self._clock.now() + self._settings.limit_retry_interval
        else:
            self._limit = None
        return failures

    def _held_back(
        self, batch: Sequence[tuple[str, Route]], *, freed: bool
    ) -> tuple[RouteFailure, ...] | None:
        """While the router is known to be full, creates wait for the retry time (None: go
        ahead): node changes come every second, the refusal would not change. A delete in
        this reconcile may have made room, so the creates go ahead at once."""
        limit = self._limit
        if limit is None or freed:
            return None
        rest = self._retry_limit_at - self._clock.now()
        if rest <= 0:
            return None
        error = (
            f"the router holds its maximum of {limit or 'its'} routes"
            f" (Neutron's router_route quota or max_routes); next try in {go_duration(rest)}"
        )
        return tuple(RouteFailure(route=r, error=error, route_limit=limit) for _, r in batch)

    def _should_warn(self, create: Create, failure: RouteFailure) -> bool:
        """Every failure warns, except a route-limit refusal already warned about lately."""
        if failure.route_limit is None:
            return True
        now = self._clock.now()
        last = self._limit_warned.get(create.node.name)
        if last is not None and now - last < self._settings.limit_warning_interval:
            return False
        self._limit_warned[create.node.name] = now
        return True

    def _record_limit(self, over_limit: Sequence[RouteFailure]) -> None:
        ROUTE_LIMIT_REACHED.set(1 if over_limit else 0)
        ROUTES_OVER_LIMIT.set(len(over_limit))
        if not over_limit:
            # The next refusal is news again: warn at once.
            self._limit_warned.clear()

    def _conditions(
        self, nodes: Sequence[Node], states: Mapping[str, Mapping[str, CidrState]]
    ) -> list[Action]:
        now = rfc3339(self._wall_clock())
        patches: list[Action] = []
        for node in nodes:
            node_states = states.get(node.name)
            if node_states is None:
                continue  # no podCIDRs and no routes: not ours to judge
            condition = condition_update(node, node_states, now=now)
            if condition is not None:
                patches.append(PatchNodeStatus(name=node.name, conditions=(condition,)))
        return patches


@dataclass(frozen=True)
class _Failed:
    failure: RouteFailure
    event: RecordEvent


def routing_changed(old: Node, new: Node) -> bool:
    """Whether an update can change the routes: podCIDRs or addresses, nothing else."""
    return pod_cidrs(old) != pod_cidrs(new) or old.status.addresses != new.status.addresses


def rfc3339(moment: datetime.datetime) -> str:
    """Kubernetes' metav1.Time on the wire: UTC, whole seconds, a `Z`."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def go_duration(seconds: float) -> str:
    """A duration the way upstream's messages print one (Go's time.Duration: 0s, 850µs,
    12.5ms, 1.25s, 2m3s), to the microsecond."""
    if seconds <= 0:
        return "0s"
    if seconds < 1e-3:
        return f"{_trim(seconds * 1e6, 3)}µs"
    if seconds < 1:
        return f"{_trim(seconds * 1e3, 3)}ms"
    minutes, rest = divmod(seconds, 60.0)
    hours, minutes = divmod(int(minutes), 60)
    prefix = (f"{hours}h" if hours else "") + (f"{minutes}m" if hours or minutes else "")
    return f"{prefix}{_trim(rest, 6)}s"


def _trim(value: float, digits: int) -> str:
    return f"{value:.{digits}f}".rstrip("0").rstrip(".")
