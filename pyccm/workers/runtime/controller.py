"""What a controller is, to the runtime (docs/architecture.md#style-controller-skeleton: one
controller, one package, one skeleton).

A controller says which topics it needs, how a change maps to keys, how to sync one key,
and which periodic tasks it wants. The runtime does the rest: replica, queue, threads,
backoff, transport to the manager, metrics. A sync reads the replica, calls the provider,
and returns the actions the manager should apply; it raises `provider.errors.RetryAfter`
to be called again after a fixed delay, and any other exception to back off.

A sync may instead commit some actions itself, through the `Committer` it was built with,
when what it does next depends on their having landed, and return the rest. The service
controller does so for every Service write: the finalizer lands before the first cloud
call (nothing is created that a deletion could miss), and a step's status, annotations and
events land before the step is recorded as done (a write the manager could not apply is
sent again, not forgotten). pyccm/workers/service/README.md says where.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Protocol

from pyccm.protocol.messages import Action, ObjectRef, Topic
from pyccm.protocol.views import Node, Service
from pyccm.provider.interface import Capability
from pyccm.workers.runtime.ratelimit import RateLimiter, default_controller_rate_limiter

Obj = Node | Service


class Later(str):
    """A key `keys_for` wants synced behind every other queued key: work that only verifies
    (the runner queues it with `add_later`)."""

    __slots__ = ()


class SyncFailed(Exception):
    """A sync that failed but still has something to say (a Warning event): the runner
    delivers `actions`, then backs the key off like any other failure."""

    def __init__(self, message: str, *, actions: tuple[Action, ...]) -> None:
        super().__init__(message)
        self.actions = actions


class Disabled(Exception):
    """The controller cannot run in this process (no cloud support, routes turned off, an
    invalid --cluster-cidr); the message says why, in one line."""


@dataclass(frozen=True)
class Periodic:
    """A task run every `period` seconds (sliding: the next run starts a period after the
    previous one ended), on its own thread; it usually just enqueues keys. It also runs at
    once when the cloud's settings of a capability in `wakes_on` are reloaded (the
    objects it enqueues may need the new settings now)."""

    name: str
    period: float
    run: Callable[[], None]
    wakes_on: frozenset[Capability] = frozenset()


@dataclass(frozen=True)
class Lane:
    """Keys that start with `prefix` wait in a queue of their own (`queue_name` in the
    workqueue metrics) and are synced by `workers` threads of their own, so that they
    neither wait behind the controller's other keys nor hold them up (upstream runs such
    work on a pool of its own, sized by its own flag)."""

    prefix: str
    queue_name: str
    workers: int


class Controller(Protocol):
    # Canonical short name (`cloud-node`, ...): process name, metric label, --controllers.
    name: str
    # The workqueue's name in metrics (upstream's: `Nodes`, `service`, `Routes`).
    queue_name: str
    topics: tuple[Topic, ...]
    # The `component` of this controller's Events (upstream's names).
    component: str
    # Keys synced apart from the others, on threads of their own; most controllers have none.
    lanes: tuple[Lane, ...]

    def rate_limiter(self) -> RateLimiter[Hashable]: ...

    def keys_for(
        self, topic: Topic, key: str, old: Obj | None, new: Obj | None
    ) -> Iterable[str]: ...

    def sync(self, key: str) -> tuple[Action, ...]: ...

    def periodics(self, enqueue: Callable[[str], None]) -> list[Periodic]: ...


def node_ref(node: Node) -> ObjectRef:
    """What an Event about `node` points at."""
    return ObjectRef(kind="Node", name=node.name, uid=node.metadata.uid)


def service_ref(service: Service) -> ObjectRef:
    return ObjectRef(
        kind="Service", name=service.name, namespace=service.namespace, uid=service.metadata.uid
    )


class DisabledController:
    """Stands in for a disabled controller: subscribes to nothing, syncs nothing. The worker
    stays up so supervisord does not restart it in a loop and the manager's /healthz,
    which expects every worker, stays green."""

    queue_name = "disabled"
    topics: tuple[Topic, ...] = ()
    component = ""
    lanes: tuple[Lane, ...] = ()

    def __init__(self, name: str) -> None:
        self.name = name

    def rate_limiter(self) -> RateLimiter[Hashable]:
        return default_controller_rate_limiter()

    def keys_for(self, topic: Topic, key: str, old: Obj | None, new: Obj | None) -> Iterable[str]:
        return ()

    def sync(self, key: str) -> tuple[Action, ...]:
        return ()

    def periodics(self, enqueue: Callable[[str], None]) -> list[Periodic]:
        return []
