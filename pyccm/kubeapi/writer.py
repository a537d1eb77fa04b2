"""The one writer: applies workers' actions to the API with the right verb.

docs/architecture.md#design-one-writer says why there is one.

Every node or service write is a read, a pure edit of what was read, and a patch that
carries the resourceVersion it was computed from, so a concurrent change makes the API
answer 409 and the writer re-reads and re-applies (at most `conflict_attempts` times)
instead of overwriting someone else's taint or finalizer. A write that would change
nothing is skipped. Never a PUT of a Service; Node deletes carry a UID precondition so a
Node re-created under the same name survives; a delete that fails otherwise records the
Warning event the worker attached to it (upstream's `DeletingNodeFailed`).

Events are aggregated as upstream's recorder does: the same reason and message on the
same object, seen again, bumps `count` and `lastTimestamp` of the existing Event.

The result of applying a `Result` is a tuple of `ActionFailure`s (empty: all applied); the
worker decides from each failure's kind whether to retry.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec

from pyccm.kubeapi import metrics
from pyccm.kubeapi.client import MERGE_PATCH, STRATEGIC_MERGE_PATCH, KubeClient
from pyccm.kubeapi.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    Invalid,
    KubeError,
    NotFound,
    TooManyRequests,
    Unauthorized,
)
from pyccm.protocol.decoding import decode_json
from pyccm.protocol.messages import (
    Action,
    ActionFailure,
    DeleteNode,
    FailureKind,
    ObjectRef,
    PatchNode,
    PatchNodeStatus,
    PatchServiceAnnotations,
    PatchServiceStatus,
    RecordEvent,
)
from pyccm.protocol.views import Node, Service, Taint

log = logging.getLogger(__name__)

Json = dict[str, Any]


@dataclass(frozen=True)
class WriterSettings:
    # Upstream retries taint and label patches 5 times, 100 ms apart with jitter 1.0.
    conflict_attempts: int = 5
    conflict_delay: float = 0.1
    # Throttled or failing API: a few tries honouring Retry-After, then the worker backs off.
    retry_attempts: int = 3
    # Upstream's recorder keeps 4096 recent events for aggregation.
    event_cache_size: int = 4096
    # Events for cluster-scoped objects (Nodes) go to this namespace, as upstream.
    event_namespace: str = "default"


class _NotLeader(Exception):
    """The writer may no longer write (see `may_write`)."""


class Writer:
    def __init__(
        self,
        *,
        client: KubeClient,
        settings: WriterSettings = WriterSettings(),
        cached_node: Callable[[str], Node | None] = lambda name: None,
        cached_service: Callable[[str], Service | None] = lambda key: None,
        may_write: Callable[[], bool] = lambda: True,
    ) -> None:
        """`may_write()` is asked before every request: once it says no (the manager let
        its Lease go, or lost it), nothing more is sent, queued actions included; they
        fail as NOT_LEADER and the workers resend them to the next leader."""
        self._may_write = may_write
        self._client = client
        self._settings = settings
        # The first attempt edits the informer's copy (upstream reads its lister too),
        # saving a GET per write; a 409 means it was stale, and the retry reads fresh.
        self._cached_node = cached_node
        self._cached_service = cached_service
        self._events: OrderedDict[tuple[str, ...], tuple[str, str, int]] = OrderedDict()
        self._events_lock = threading.Lock()

    def apply(self, actions: tuple[Action, ...]) -> tuple[ActionFailure, ...]:
        failures = []
        for index, action in enumerate(actions):
            name = type(action).__name__
            try:
                self._with_retries(action)
            except _NotLeader:
                metrics.WRITER_ACTIONS.labels(action=name, outcome="not_leader").inc()
                failures.append(
                    ActionFailure(index=index, kind=FailureKind.NOT_LEADER, message="not leading")
                )
            except KubeError as error:
                kind = _failure_kind(action, error)
                metrics.WRITER_ACTIONS.labels(action=name, outcome=kind.value).inc()
                if kind is not FailureKind.NOT_FOUND:
                    log.warning("%s failed: %s", name, error)
                failures.append(ActionFailure(index=index, kind=kind, message=str(error)))
                self._record_failure(action, kind, error)
            else:
                metrics.WRITER_ACTIONS.labels(action=name, outcome="ok").inc()
        return tuple(failures)

    def _record_failure(self, action: Action, kind: FailureKind, error: KubeError) -> None:
        """Upstream's Warning `DeletingNodeFailed`, when the worker asked for one.

        A Node already gone (404) or re-created under the same name (UID precondition)
        gets none: the node the worker meant to delete no longer exists, which is what it
        wanted, and a Warning on the new Node's name would blame a healthy node.
        """
        if not isinstance(action, DeleteNode) or action.failed_event is None:
            return
        if kind in (FailureKind.NOT_FOUND, FailureKind.PRECONDITION):
            return
        event = action.failed_event
        # Its own failure is logged by apply(); the delete's failure is what the worker sees.
        self.apply((msgspec.structs.replace(event, message=f"{event.message}: {error}"),))

    def _with_retries(self, action: Action) -> None:
        conflicts = throttles = 0
        while True:
            if not self._may_write():
                raise _NotLeader
            try:
                self._apply_one(action, fresh=conflicts > 0)
                return
            except Conflict:
                conflicts += 1
                if isinstance(action, DeleteNode) or conflicts >= self._settings.conflict_attempts:
                    raise
                metrics.WRITER_CONFLICTS.labels(action=type(action).__name__).inc()
                time.sleep(self._settings.conflict_delay * random.uniform(1.0, 2.0))
            except KubeError as error:
                throttles += 1
                if not error.retryable or throttles >= self._settings.retry_attempts:
                    raise
                time.sleep(
                    error.retry_after if isinstance(error, TooManyRequests) else 0.2 * throttles
                )

    def _apply_one(self, action: Action, *, fresh: bool) -> None:
        match action:
            case PatchNode():
                self._patch_node(action, fresh=fresh)
            case PatchNodeStatus():
                self._patch_node_status(action)
            case DeleteNode():
                self._delete_node(action)
            case RecordEvent():
                self._record_event(action)
            case PatchServiceStatus():
                self._patch_service_status(action, fresh=fresh)
            case PatchServiceAnnotations():
                self._patch_service_annotations(action)

    # --- nodes -----------------------------------------------------------------------

    def _patch_node(self, action: PatchNode, *, fresh: bool) -> None:
        path = f"/api/v1/nodes/{action.name}"
        node = None if fresh else self._cached_node(action.name)
        if node is None:
            node = decode_json(self._client.request("GET", path), Node)
        patch = node_patch(node, action)
        if patch:
            patch.setdefault("metadata", {})["resourceVersion"] = node.metadata.resource_version
            self._client.request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    def _patch_node_status(self, action: PatchNodeStatus) -> None:
        path = f"/api/v1/nodes/{action.name}/status"
        if action.addresses is not None:
            # A merge patch replaces the whole list, as upstream's address patch intends.
            addresses = [msgspec.to_builtins(a) for a in action.addresses]
            self._client.request(
                "PATCH", path, body={"status": {"addresses": addresses}}, content_type=MERGE_PATCH
            )
        if action.conditions:
            # Strategic merge keys conditions by type: other conditions stay as they are.
            conditions = [msgspec.to_builtins(c) for c in action.conditions]
            self._client.request(
                "PATCH",
                path,
                body={"status": {"conditions": conditions}},
                content_type=STRATEGIC_MERGE_PATCH,
            )

    def _delete_node(self, action: DeleteNode) -> None:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": action.uid}}
        self._client.request("DELETE", f"/api/v1/nodes/{action.name}", body=body)

    # --- services --------------------------------------------------------------------

    def _patch_service_status(self, action: PatchServiceStatus, *, fresh: bool) -> None:
        path = f"/api/v1/namespaces/{action.namespace}/services/{action.name}"
        service = None if fresh else self._cached_service(f"{action.namespace}/{action.name}")
        if service is None:
            service = decode_json(self._client.request("GET", path), Service)
        _check_uid(service.metadata.uid, action.uid, path)
        patch = service_status_patch(service, action)
        if patch:
            patch.setdefault("metadata", {})["resourceVersion"] = service.metadata.resource_version
            self._client.request("PATCH", f"{path}/status", body=patch, content_type=MERGE_PATCH)

    def _patch_service_annotations(self, action: PatchServiceAnnotations) -> None:
        path = f"/api/v1/namespaces/{action.namespace}/services/{action.name}"
        # The uid in a merge patch is a precondition: the API refuses it for another object.
        patch = {"metadata": {"uid": action.uid, "annotations": dict(action.annotations)}}
        self._client.request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    # --- events ----------------------------------------------------------------------

    def _record_event(self, action: RecordEvent) -> None:
        ref = action.regarding
        namespace = ref.namespace or self._settings.event_namespace
        key = (
            ref.kind,
            ref.namespace,
            ref.name,
            ref.uid,
            action.type,
            action.reason,
            action.message,
            action.component,
        )
        now = _now()
        with self._events_lock:
            seen = self._events.get(key)
        if seen is not None:
            name, first, count = seen
            try:
                self._client.request(
                    "PATCH",
                    f"/api/v1/namespaces/{namespace}/events/{name}",
                    body={"count": count + 1, "lastTimestamp": now},
                    content_type=MERGE_PATCH,
                )
                self._remember(key, (name, first, count + 1))
                return
            except NotFound:
                pass  # expired on the server: record it afresh
        name = f"{ref.name}.{uuid.uuid4().hex[:16]}"
        self._client.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/events",
            body=_event(name, namespace, action, now),
        )
        self._remember(key, (name, now, 1))

    def _remember(self, key: tuple[str, ...], value: tuple[str, str, int]) -> None:
        with self._events_lock:
            self._events[key] = value
            self._events.move_to_end(key)
            while len(self._events) > self._settings.event_cache_size:
                self._events.popitem(last=False)


# --- pure edits (tested on their own) ----------------------------------------------------


def node_patch(node: Node, action: PatchNode) -> Json:
    """The merge patch that applies `action` to `node`; empty when nothing would change."""
    patch: Json = {}
    labels = {k: v for k, v in action.labels.items() if node.metadata.labels.get(k) != v}
    if labels:
        patch["metadata"] = {"labels": labels}
    spec: Json = {}
    if action.provider_id and not node.spec.provider_id:
        spec["providerID"] = action.provider_id
    taints = edit_taints(node.spec.taints, add=action.add_taints, remove=action.remove_taints)
    if taints != node.spec.taints:
        spec["taints"] = [msgspec.to_builtins(t) for t in taints]
    if spec:
        patch["spec"] = spec
    return patch


def edit_taints(
    current: tuple[Taint, ...], *, add: tuple[Taint, ...], remove: tuple[tuple[str, str], ...]
) -> tuple[Taint, ...]:
    """Remove by (key, effect) (empty effect: any), then add or replace by (key, effect)."""

    def removed(taint: Taint) -> bool:
        return any(taint.key == key and effect in ("", taint.effect) for key, effect in remove)

    kept = [t for t in current if not removed(t)]
    for taint in add:
        same = [t for t in kept if t.key == taint.key and t.effect == taint.effect]
        if same and same[0].value == taint.value:
            continue
        kept = [t for t in kept if t not in same] + [taint]
    return tuple(kept)


def service_status_patch(service: Service, action: PatchServiceStatus) -> Json:
    patch: Json = {}
    finalizers = [f for f in service.metadata.finalizers if f not in action.remove_finalizers]
    finalizers += [f for f in action.add_finalizers if f not in finalizers]
    if tuple(finalizers) != service.metadata.finalizers:
        patch["metadata"] = {"finalizers": finalizers}
    if action.ingress is not None and action.ingress != service.status.load_balancer.ingress:
        ingress = [msgspec.to_builtins(i) for i in action.ingress]
        patch["status"] = {"loadBalancer": {"ingress": ingress}}
    return patch


def _check_uid(actual: str, wanted: str, path: str) -> None:
    if wanted and actual != wanted:
        raise Conflict(
            f"{path}: uid {actual} is not {wanted} (the object was re-created)",
            code=409,
            reason="Precondition",
        )


def _event(name: str, namespace: str, action: RecordEvent, now: str) -> Json:
    ref: ObjectRef = action.regarding
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {
            "kind": ref.kind,
            "name": ref.name,
            "namespace": ref.namespace,
            "uid": ref.uid,
            "apiVersion": ref.api_version,
        },
        "reason": action.reason,
        "message": action.message,
        "type": action.type,
        "source": {"component": action.component},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "reportingComponent": action.component,
    }


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_FAILURES: tuple[tuple[type[KubeError], FailureKind], ...] = (
    (NotFound, FailureKind.NOT_FOUND),
    (Forbidden, FailureKind.FORBIDDEN),
    (Unauthorized, FailureKind.FORBIDDEN),
    (Invalid, FailureKind.INVALID),
    (BadRequest, FailureKind.INVALID),
)


def _failure_kind(action: Action, error: KubeError) -> FailureKind:
    if isinstance(error, Conflict):
        precondition = isinstance(action, DeleteNode) or error.reason == "Precondition"
        return FailureKind.PRECONDITION if precondition else FailureKind.CONFLICT
    for cls, kind in _FAILURES:
        if isinstance(error, cls):
            return kind
    return FailureKind.UNAVAILABLE
