"""A seeded run of the service controller and the effects it had, step by step
(tests/service_controller/test_effects_in_order.py, bench/service_trace.py).

`scenario(seed)` draws a sequence of things that happen to Services and nodes: creates,
annotation changes (a node selector, a value the OpenStack provider refuses), port changes,
node joins, departures and relabels, deletions with and without our finalizer, re-creations
under a new UID, type changes, a status another writer cleared, drift resyncs, a cloud call
or a write that fails next, a load balancer still provisioning. `run(harness, steps, ...)`
plays them on a `Harness` and, after each, drains the queue the way the runner would (one
key at a time, first in first out; `@nodes` once the fake clock passed the quiet period; a
`RetryAfter` comes back after its delay on the fake clock; a failed key at the next step).
What each step did is one `Effects`: the cloud calls, the writes committed (the typed
messages, as the manager receives them), each sync's outcome (a `SyncFailed` carries its
Warning events) and the keys enqueued. Ids the cloud made up are numbered in order of
first appearance, so two runs compare equal when they did the same things in the same order.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from pyccm.protocol.messages import Ack, Action, FailureKind, Topic
from pyccm.protocol.views import LoadBalancerStatus, Node, Service, ServiceStatus
from pyccm.provider.errors import CloudError, ImplementedElsewhere, RetryAfter
from pyccm.workers.runtime.controller import SyncFailed
from pyccm.workers.service.policy import EXCLUDE_LABEL, FINALIZER
from pyccm.workers.service.sweep import NODE_QUIET, SWEEP
from tests.support.nodes import DELETED_AT
from tests.support.services import Harness, make_service

SERVICES = ("a", "b", "c")
# The bad value: the OpenStack provider refuses it with a LoadBalancerAnnotationInvalid
# Warning; the fake cloud reads no such annotation (for it, this is an annotation change).
BAD_ANNOTATION = ("loadbalancer.openstack.org/lb-method", "NOT_A_METHOD")
ROLE = "example.com/role"
# The fake cloud's node-selector annotation, and the OpenStack provider's.
SELECTORS = ("fake.pyccm.io/node-selector", "loadbalancer.openstack.org/node-selector")
# A sync is retried after RetryAfter at most this often per step (a load balancer that
# provisions for longer is left to the next step).
RETRIES = 6

Step = tuple[str, ...]
Call = tuple[str, str]


@dataclass
class Effects:
    """What one step led to, in the order it happened: `["sync", key]`, `["cloud", method,
    path]`, `["commit", key, [typed actions]]`, `["ok" | "failed" | "retry-after", key,
    ...]`, `["enqueued", key]`."""

    step: Step
    log: list[Any] = field(default_factory=list)


def scenario(seed: int, *, length: int = 40, nodes: int = 6) -> list[Step]:
    """`length` steps drawn with `random.Random(seed)`: the same steps for every run."""
    rng = random.Random(seed)
    kinds = [
        *["create"] * 4,
        *["annotate", "bad-annotation", "select", "ports", "resync", "status-cleared"],
        *["node-join", "node-leave", "relabel", "exclude", "type-change"],
        *["delete", "vanish", "recreate", "cloud-error", "write-fails", "provisioning"],
        *["elsewhere", "foreign-deleted"],
    ]
    # Every run starts with three nodes and two Services.
    steps: list[Step] = [
        *(("node-join", f"n{i}") for i in (1, 2, 3)),
        ("create", "a"),
        ("create", "b"),
    ]
    for _ in range(length):
        kind = rng.choice(kinds)
        name = rng.choice(SERVICES)
        node = f"n{rng.randint(1, nodes)}"
        match kind:
            case "node-join" | "node-leave" | "exclude":
                steps.append((kind, node))
            case "relabel":
                steps.append((kind, node, rng.choice(("web", "db"))))
            case "select":
                steps.append((kind, name, rng.choice(("web", "db", ""))))
            case "ports":
                steps.append((kind, name, rng.choice(("80", "80,443", "8080"))))
            case "write-fails":
                steps.append((kind, rng.choice(("conflict", "not_found", "unavailable"))))
            case "cloud-error":
                steps.append(
                    (kind, rng.choice(("lb_ensure", "lb_update", "lb_get", "lb_ensure_deleted")))
                )
            case "resync" | "provisioning" | "elsewhere":
                steps.append((kind,))
            case _:
                steps.append((kind, name))
    return steps


@dataclass
class Cloud:
    """What a run needs of the cloud under the controller: its calls since the last look,
    and how to make its next call fail or its next load balancer provision slowly."""

    calls: Callable[[], list[Call]]
    fail_next: Callable[[str], None]
    provisioning: Callable[[], None]
    elsewhere: Callable[[], None]
    node: Callable[[int, dict[str, str]], Node]


def fake_cloud(h: Harness) -> Cloud:
    from tests.support.services import make_node

    seen = [0]

    def calls() -> list[Call]:
        new = h.cloud.calls[seen[0] :]
        seen[0] = len(h.cloud.calls)
        return [(c.method, c.subject) for c in new]

    def fail(method: str) -> None:
        h.cloud.fail_next(method, CloudError(f"{method} failed"))  # type: ignore[arg-type]

    return Cloud(
        calls=calls,
        fail_next=fail,
        provisioning=lambda: h.cloud.set_lb_provisioning(syncs=2, retry_delay=5.0),
        elsewhere=lambda: h.cloud.fail_next("lb_ensure", ImplementedElsewhere("elsewhere")),
        node=lambda index, labels: make_node(f"n{index}", labels=labels),
    )


def run(h: Harness, steps: Sequence[Step], cloud: Cloud) -> list[Effects]:
    """Play `steps` on `h` (its controller on `cloud`); the effects of each."""
    player = _Player(h, cloud)
    return [player.play(step) for step in steps]


def normalized(effects: Sequence[Effects]) -> list[dict[str, Any]]:
    """The effects as JSON-ready dicts, made-up ids numbered by first appearance."""
    ids: dict[str, str] = {}

    def number(match: re.Match[str]) -> str:
        return ids.setdefault(match.group(0), f"<id{len(ids)}>")

    rows = []
    for e in effects:
        text = json.dumps(msgspec.to_builtins(e.__dict__), sort_keys=True)
        rows.append(json.loads(_UUID.sub(number, text)))
    return rows


def digests(effects: Sequence[Effects]) -> list[str]:
    """One short digest per step (of its normalized effects)."""
    rows = normalized(effects)
    return [
        hashlib.sha256(json.dumps(row, sort_keys=True).encode()).hexdigest()[:16] for row in rows
    ]


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class _Player:
    def __init__(self, h: Harness, cloud: Cloud) -> None:
        self._h = h
        self._cloud = cloud
        self._labels: dict[int, dict[str, str]] = {}
        self._failed: list[str] = []
        self._uids = 0
        self._log: list[Any] = []
        cloud.calls()  # what the set-up did is not a step's
        commit = h.commit

        def logged(key: str, actions: tuple[Action, ...]) -> Ack:
            self._cloud_calls()
            self._log.append(["commit", key, [_typed(a) for a in actions]])
            return commit(key, actions)

        h.commit = logged  # type: ignore[method-assign]
        h.enqueued.clear()

    def play(self, step: Step) -> Effects:
        h = self._h
        self._log = []
        self._do(step)
        queue = [*self._failed, *h.enqueued]
        self._failed = []
        h.enqueued.clear()
        self._drain(queue)
        self._cloud_calls()
        return Effects(step=step, log=self._log)

    def _cloud_calls(self) -> None:
        self._log.extend(["cloud", *call] for call in self._cloud.calls())

    def _drain(self, queue: list[str]) -> None:
        h = self._h
        tries: dict[str, int] = {}
        while queue:
            key = queue.pop(0)
            if key in queue:
                continue  # the workqueue holds a key once
            if key == SWEEP:
                h.clock.advance(NODE_QUIET)
            outcome = self._sync(key)
            if isinstance(outcome, RetryAfter) and tries.get(key, 0) < RETRIES:
                tries[key] = tries.get(key, 0) + 1
                h.clock.advance(outcome.delay)
                queue.append(key)
            self._log.extend(["enqueued", str(k)] for k in h.enqueued)
            queue.extend(h.enqueued)
            h.enqueued.clear()

    def _sync(self, key: str) -> object:
        self._cloud_calls()
        self._log.append(["sync", str(key), type(key).__name__])
        try:
            returned = self._h.controller.sync(key)
        except RetryAfter as later:
            self._cloud_calls()
            self._log.append(["retry-after", str(key), later.delay])
            return later
        except SyncFailed as failed:
            self._cloud_calls()
            actions = [_typed(a) for a in failed.actions]
            self._log.append(["failed", str(key), str(failed), actions])
            self._failed.append(key)
            return failed
        self._cloud_calls()
        self._log.append(["ok", str(key), [_typed(a) for a in returned]])
        return None

    # --- the steps ------------------------------------------------------------------------

    def _do(self, step: Step) -> None:
        h = self._h
        kind, *args = step
        match kind:
            case "create":
                if self._service(args[0]) is None:
                    h.put(make_service(args[0], uid=self._uid(args[0])))
            case "annotate":
                self._annotate(args[0], "example.com/revision", str(self._uids))
                self._uids += 1
            case "bad-annotation":
                self._annotate(args[0], *BAD_ANNOTATION)
            case "select":
                for selector in SELECTORS:
                    value = f"{ROLE}={args[1]}" if args[1] else None
                    self._annotate(args[0], selector, value)
            case "ports":
                ports = tuple(int(p) for p in args[1].split(","))
                self._replace_spec(args[0], ports=tuple(_port(p) for p in ports))
            case "status-cleared":
                self._replace(args[0], status=ServiceStatus(load_balancer=LoadBalancerStatus()))
            case "node-join" | "node-leave" | "relabel" | "exclude":
                self._node(kind, args)
            case "type-change":
                service = self._service(args[0])
                if service is not None:
                    kind = "ClusterIP" if service.spec.type == "LoadBalancer" else "LoadBalancer"
                    self._replace_spec(args[0], type=kind)
            case _:
                self._trouble(kind, args)

    def _trouble(self, kind: str, args: list[str]) -> None:
        h = self._h
        match kind:
            case "resync":
                (resync, *_) = h.controller.periodics(h.enqueued.append)
                resync.run()
            case "delete":
                service = self._service(args[0])
                if service is not None and FINALIZER in service.metadata.finalizers:
                    meta = msgspec.structs.replace(service.metadata, deletion_timestamp=DELETED_AT)
                    h.put(msgspec.structs.replace(service, metadata=meta))
                elif service is not None:
                    h.replica.apply(Topic.SERVICE, service.key, None)
            case "vanish":
                h.replica.apply(Topic.SERVICE, f"default/{args[0]}", None)
            case "recreate":
                if self._service(args[0]) is not None:
                    h.put(make_service(args[0], uid=self._uid(args[0])))
            case "cloud-error":
                self._cloud.fail_next(args[0])
            case "write-fails":
                h.fail_next.append(FailureKind(args[0]))
            case "provisioning":
                self._cloud.provisioning()
            case "elsewhere":
                self._cloud.elsewhere()
            case "foreign-deleted":
                # Another class's Service, deleted while it holds a finalizer of our name.
                service = make_service(f"{args[0]}-other", lb_class="example.com/other")
                meta = msgspec.structs.replace(
                    service.metadata, finalizers=(FINALIZER,), deletion_timestamp=DELETED_AT
                )
                h.put(msgspec.structs.replace(service, metadata=meta))

    def _node(self, kind: str, args: list[str]) -> None:
        h = self._h
        index = int(args[0][1:])
        labels = self._labels.get(index)
        if kind == "node-leave":
            if labels is not None:
                h.replica.apply(Topic.NODE, self._cloud.node(index, {}).key, None)
                del self._labels[index]
            return
        if kind == "node-join":
            labels = {} if labels is None else labels
        elif labels is None:
            return
        elif kind == "relabel":
            labels = {**labels, ROLE: args[1]}
        else:
            labels = {**labels, EXCLUDE_LABEL: "true"}
        self._labels[index] = labels
        h.put(self._cloud.node(index, labels))

    def _service(self, name: str) -> Service | None:
        return self._h.replica.service(f"default/{name}")

    def _uid(self, name: str) -> str:
        self._uids += 1
        return f"uid-{name}-{self._uids}"

    def _annotate(self, name: str, key: str, value: str | None) -> None:
        service = self._service(name)
        if service is None:
            return
        annotations = {**service.metadata.annotations, key: value}
        kept = {k: v for k, v in annotations.items() if v is not None}
        self._replace(name, metadata=msgspec.structs.replace(service.metadata, annotations=kept))

    def _replace_spec(self, name: str, **changes: Any) -> None:
        service = self._service(name)
        if service is not None:
            self._replace(name, spec=msgspec.structs.replace(service.spec, **changes))

    def _replace(self, name: str, **changes: Any) -> None:
        service = self._service(name)
        if service is not None:
            self._h.put(msgspec.structs.replace(service, **changes))


def _port(port: int) -> Any:
    from pyccm.protocol.views import ServicePort

    return ServicePort(port=port, node_port=30000 + port % 1000, name=f"p{port}")


def _typed(action: Any) -> dict[str, Any]:
    """A message as the manager decodes it: its type and its fields."""
    return {"type": type(action).__name__, **msgspec.to_builtins(action)}


# --- the recorded digests (tests/service_controller/test_effects_in_order.py) -------------

RECORDED = "tests/service_controller/effects_in_order.json"
SEEDS = 20


def fake_run_digests(seed: int) -> list[tuple[Step, str]]:
    """Each step of `scenario(seed)` on the fake cloud, with the digest of its effects."""
    from tests.support.services import harness

    h = harness(nodes=0)
    effects = run(h, scenario(seed), fake_cloud(h))
    return [(e.step, digest) for e, digest in zip(effects, digests(effects), strict=True)]


def record(path: str = RECORDED) -> None:
    """Write the digests of seeds 0..SEEDS-1 (`python -c 'from tests.support.service_trace
    import record; record()'`), only when the effects were meant to change."""
    table = {
        str(seed): [f"{digest} {' '.join(step)}" for step, digest in fake_run_digests(seed)]
        for seed in range(SEEDS)
    }
    with open(path, "w") as out:
        json.dump(table, out, indent=1)
        out.write("\n")
