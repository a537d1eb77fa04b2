"""route: upstream §1.4 (node-route-controller), watch-driven with a periodic safety net.

There is one key, `routes`: every reconcile lists the router's routes once and compares them
with every node's podCIDRs, so per-node keys would only multiply the list calls. The key is
enqueued when a node is added or deleted, when a node's podCIDRs or addresses change (never
for the heartbeats that change a node's resourceVersion every few seconds), and every
`--route-reconciliation-period` (upstream's timer, kept as the clean-up for anything a watch
missed). Reconciles start at most once per `min_interval`: a key that comes back sooner gets
`RetryAfter` for the rest of the interval, and the queue folds every change that arrives in
the meantime into that one run. A node change is routed within about a second; churn costs at
most one route listing per second.

Inside a reconcile the cloud calls run on a thread pool bounded by `max_in_flight` (upstream's
200), all deletes before any create, so an update's delete can never remove the route its
create just wrote. Failed calls are logged and retried by the next reconcile; only a failed
listing fails the sync (the runner backs off). The sync returns the Warning events and the
NetworkUnavailable conditions for the manager to write.
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from prometheus_client import Counter

from protocol.messages import Action, PatchNodeStatus, RecordEvent, Topic
from protocol.views import Node
from provider.errors import RetryAfter
from provider.interface import Route, Routes
from workers.route.cidrs import Network, canonical
from workers.route.plan import CidrState, Create, condition_update, plan_routes, pod_cidrs
from workers.runtime.clock import MONOTONIC, Clock
from workers.runtime.controller import Obj, Periodic, node_ref
from workers.runtime.ratelimit import RateLimiter, route_controller_rate_limiter
from workers.runtime.replica import Replica

log = logging.getLogger(__name__)

KEY = "routes"
# Upstream's event source component for this controller.
COMPONENT = "route_controller"

ROUTE_SYNCS = Counter(
    "route_controller_route_sync_total", "Reconciles of the node routes (upstream's metric)."
)

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class RouteSettings:
    # Parsed --cluster-cidr (parse_cluster_cidrs): only routes inside these are ours.
    cluster_cidrs: tuple[Network, ...]
    # Upstream --route-reconciliation-period: the safety-net full reconcile.
    reconciliation_period: float = 10.0
    # At most one reconcile per second: a change is routed quickly, churn costs one list/s.
    min_interval: float = 1.0
    # Upstream maxConcurrentRouteOperations: cloud calls in flight within one reconcile.
    max_in_flight: int = 200


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class RouteController:
    name = "route"
    queue_name = "Routes"
    topics: tuple[Topic, ...] = (Topic.NODE,)
    component = COMPONENT

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

    def rate_limiter(self) -> RateLimiter[Hashable]:
        # Only a failed listing goes through it: upstream's one retry per 10 s, capped at 10 s.
        return route_controller_rate_limiter(clock=self._clock)

    def keys_for(self, topic: Topic, key: str, old: Obj | None, new: Obj | None) -> Iterable[str]:
        if topic is not Topic.NODE:
            return ()
        if old is None or new is None:
            return (KEY,)
        if isinstance(old, Node) and isinstance(new, Node) and routing_changed(old, new):
            return (KEY,)
        return ()

    def periodics(self, enqueue: Callable[[str], None]) -> list[Periodic]:
        return [
            Periodic(
                name="reconcile",
                period=self._settings.reconciliation_period,
                run=lambda: enqueue(KEY),
            )
        ]

    def sync(self, key: str) -> tuple[Action, ...]:
        if key != KEY:
            return ()
        self._claim_start()
        ROUTE_SYNCS.inc()
        nodes = self._replica.nodes()
        # A listing error propagates: the runner backs the key off and tries again.
        routes = self._routes.list(nodes=nodes)
        return self._reconcile(nodes, routes)

    def _claim_start(self) -> None:
        """Record this reconcile's start, or raise RetryAfter for the rest of min_interval."""
        with self._start_lock:
            now = self._clock.now()
            if self._last_start is not None:
                remaining = self._last_start + self._settings.min_interval - now
                if remaining > 0:
                    raise RetryAfter("the last reconcile started too recently", delay=remaining)
            self._last_start = now

    def _reconcile(self, nodes: Sequence[Node], routes: Sequence[Route]) -> tuple[Action, ...]:
        plan = plan_routes(nodes=nodes, routes=routes, cluster_cidrs=self._settings.cluster_cidrs)
        self._in_parallel(self._delete, plan.deletes)
        outcomes = self._in_parallel(self._create, plan.creates)
        states = {name: dict(cidrs) for name, cidrs in plan.states.items()}
        events: list[Action] = []
        for create, failure in zip(plan.creates, outcomes, strict=True):
            if failure is None:
                states[create.node.name][canonical(create.cidr)] = CidrState.KEEP
            else:
                events.append(failure)
        return (*events, *self._conditions(nodes, states))

    def _in_parallel(self, call: Callable[[T], R], items: Sequence[T]) -> list[R]:
        if not items:
            return []
        workers = min(self._settings.max_in_flight, len(items))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="route-call") as pool:
            return list(pool.map(call, items))

    def _delete(self, route: Route) -> None:
        started = self._clock.now()
        log.info("deleting route %s %s", route.name, route.destination_cidr)
        try:
            self._routes.delete(route=route)
        except Exception as error:
            # Any failure, even a provider bug, must not stop the other calls; the next
            # reconcile tries again.
            log.error(
                "could not delete route %s %s after %s: %s",
                route.name,
                route.destination_cidr,
                go_duration(self._clock.now() - started),
                error,
            )

    def _create(self, create: Create) -> RecordEvent | None:
        """Create one route; the FailedToCreateRoute Warning when that fails."""
        node, started = create.node, self._clock.now()
        hint = node.metadata.uid
        route = Route(
            name="",
            target_node=node.name,
            destination_cidr=create.cidr,
            target_node_addresses=node.status.addresses,
        )
        log.info("creating route for node %s %s with hint %s", node.name, create.cidr, hint)
        try:
            self._routes.create(name_hint=hint, route=route)
        except Exception as error:
            elapsed = go_duration(self._clock.now() - started)
            message = (
                f"Could not create route {hint} {create.cidr} for node {node.name}"
                f" after {elapsed}: {error}"
            )
            log.error("%s", message)
            return RecordEvent(
                regarding=node_ref(node),
                reason="FailedToCreateRoute",
                message=message,
                type="Warning",
                component=COMPONENT,
            )
        return None

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
