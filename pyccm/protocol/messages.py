"""Every message that crosses the bus, in one tagged union
(docs/architecture.md#style-message-union).

The bus follows the ZeroMQ Guide's Clone pattern (docs/architecture.md#bus-clone): the manager
PUBlishes
sequenced `Delta`s per topic and a `Heartbeat` each second, and answers a worker's `Hello`
on the ROUTER socket with one `Snapshot` per topic it asked for. Workers send `Result`s on
their DEALER socket and wait for the manager's `Ack`.

Rules for evolving this module: new fields only with defaults; never remove or retype a
field without bumping `PROTOCOL_VERSION`. Every message carries its sender's session id,
so a change of session means the peer restarted. Encoding is msgpack; never pickle.
"""

from __future__ import annotations

import enum
from typing import NewType

import msgspec

from pyccm.protocol.views import (
    LoadBalancerIngress,
    Node,
    NodeAddress,
    NodeCondition,
    Service,
    Taint,
)

# 2: a Hello names its view (protocol.projections); heartbeats count sequences per channel.
# Still 2 with `Hello.endpoints`, `Refused.leader` and `Pause.leaving` (leader discovery,
# manager/BUS.md):
# both have defaults, and a peer that does not know them ignores them, which is the
# behaviour before them (the worker stays where it dialled). No bump, so a rolling upgrade
# of split-mode pods is not refused for good half-way through.
PROTOCOL_VERSION = 2

SessionId = NewType("SessionId", str)
Seq = NewType("Seq", int)
ResultId = NewType("ResultId", int)


class Topic(enum.StrEnum):
    """A PUB/SUB topic: the first frame of every published message."""

    NODE = "node"
    SERVICE = "service"
    # Heartbeats, pause and resume go to every worker whatever it subscribed to.
    CONTROL = "control"


class _Message(msgspec.Struct, frozen=True, tag_field="msg", omit_defaults=True):
    session: SessionId


# --- manager -> workers, on PUB ---------------------------------------------------------


class Delta(_Message, frozen=True, tag="delta"):
    """One change of one object in one view; `seq` is that channel's sequence. No object
    means it was deleted, or left the view."""

    topic: Topic
    seq: Seq
    key: str
    node: Node | None = None
    service: Service | None = None


class Heartbeat(_Message, frozen=True, tag="heartbeat"):
    """Sent each second; carries each channel's last sequence (keyed by
    `protocol.projections.channel`) so a quiet gap is still seen."""

    seqs: dict[str, Seq]
    paused: bool = False
    # Set when a worker sends it: the manager's /healthz tracks each worker by name.
    worker: str = ""


class Pause(_Message, frozen=True, tag="pause"):
    """Stop starting syncs (the manager is losing or giving up the lease)."""

    reason: str = ""
    # This manager stops serving for good (SIGTERM, a lost Lease): a worker that followed it
    # to its advertised addresses goes back to its seeds now, not after 3 s of silence.
    leaving: bool = False


class Resume(_Message, frozen=True, tag="resume"):
    """Syncs may start again."""


# --- worker <-> manager, on DEALER/ROUTER -----------------------------------------------


class Hello(_Message, frozen=True, tag="hello"):
    worker: str
    topics: tuple[Topic, ...]
    protocol: int = PROTOCOL_VERSION
    # The controller whose projection (protocol.projections.VIEWS) this worker receives.
    view: str = ""
    # The (PUB, ROUTER) addresses this worker dialled. A leader that advertises other
    # addresses (--bus-advertise-address) answers with `Refused.leader` instead of
    # snapshots: addresses behind a Service may have put the SUB on another manager.
    endpoints: tuple[str, ...] = ()


class Refused(_Message, frozen=True, tag="refused"):
    """The manager will not serve this worker now (not leading) or ever (`fatal`).

    `leader` is the leader's advertised (PUB, ROUTER) addresses when this manager knows
    them (from the Lease, or its own): a worker not connected there moves both sockets there.
    """

    reason: str
    fatal: bool = False
    leader: tuple[str, ...] = ()


class Snapshot(_Message, frozen=True, tag="snapshot"):
    """One view of one topic, whole, as of `seq` (that channel's sequence)."""

    topic: Topic
    seq: Seq
    nodes: tuple[Node, ...] = ()
    services: tuple[Service, ...] = ()
    paused: bool = False


class WhoIs(_Message, frozen=True, tag="whois"):
    """A worker about to build its provider asks which cluster it works for. Any manager
    replica answers (`Identity`), leading or not: the id is the cluster's, not the Lease's."""

    worker: str


class Identity(_Message, frozen=True, tag="identity"):
    """The cluster's id (the `kube-system` namespace's UID, or the manager's `--cluster-id`),
    which pyccm writes into the tags of the cloud resources it creates; "" while the
    manager has not read it yet (the worker asks again)."""

    cluster_id: str


class WorkerMetrics(_Message, frozen=True, tag="metrics"):
    """A worker's own metrics, in the Prometheus text format, every
    `pyccm.exposition.REPORT_INTERVAL` on a tcp:// bus: a split-mode worker's pod serves
    no port, so the manager's `/metrics` carries them (labelled with `worker`)."""

    worker: str
    exposition: str


# --- actions: what a worker asks the manager to write -----------------------------------


class ObjectRef(msgspec.Struct, frozen=True, omit_defaults=True):
    """What an Event is about."""

    kind: str
    name: str
    namespace: str = ""
    uid: str = ""
    api_version: str = "v1"


class _Action(msgspec.Struct, frozen=True, tag_field="action", omit_defaults=True):
    pass


class PatchNode(_Action, frozen=True, tag="patch_node"):
    """Labels (None deletes), providerID (set only if empty), taints added and removed.

    Taint edits are applied to the node's current taints by the writer, with the
    resourceVersion in the patch so a concurrent taint change conflicts and is retried.
    """

    name: str
    labels: dict[str, str | None] = {}
    provider_id: str = ""
    add_taints: tuple[Taint, ...] = ()
    # (key, effect) pairs; an empty effect matches every effect.
    remove_taints: tuple[tuple[str, str], ...] = ()


class PatchNodeStatus(_Action, frozen=True, tag="patch_node_status"):
    """`nodes/status`: replace the address list and/or merge conditions by type."""

    name: str
    addresses: tuple[NodeAddress, ...] | None = None
    conditions: tuple[NodeCondition, ...] = ()


class RecordEvent(_Action, frozen=True, tag="event"):
    regarding: ObjectRef
    reason: str
    message: str
    type: str = "Normal"
    component: str = ""


class DeleteNode(_Action, frozen=True, tag="delete_node"):
    """DELETE with a UID precondition, so a re-created Node of the same name survives.

    `failed_event` is recorded if the delete fails (upstream's Warning
    `DeletingNodeFailed`), with ": <the API's error>" appended to its message. Not when the
    Node is already gone or was re-created: the node meant is gone either way.
    """

    name: str
    uid: str
    failed_event: RecordEvent | None = None


class PatchServiceStatus(_Action, frozen=True, tag="patch_service_status"):
    """`services/status`: the ingress (None leaves it alone) and the cleanup finalizer."""

    namespace: str
    name: str
    uid: str
    ingress: tuple[LoadBalancerIngress, ...] | None = None
    add_finalizers: tuple[str, ...] = ()
    remove_finalizers: tuple[str, ...] = ()


class PatchServiceAnnotations(_Action, frozen=True, tag="patch_service_annotations"):
    namespace: str
    name: str
    uid: str
    annotations: dict[str, str | None]


Action = (
    PatchNode
    | PatchNodeStatus
    | DeleteNode
    | RecordEvent
    | PatchServiceStatus
    | PatchServiceAnnotations
)


class Result(_Message, frozen=True, tag="result"):
    """The outcome of one sync: actions to apply, in order."""

    worker: str
    id: ResultId
    key: str
    actions: tuple[Action, ...]


class FailureKind(enum.StrEnum):
    """Why the manager could not apply an action; the worker decides whether to retry."""

    NOT_FOUND = "not_found"  # the object is gone: nothing to retry
    CONFLICT = "conflict"  # still conflicting after the writer's retries: resync the key
    PRECONDITION = "precondition"  # a UID precondition failed: the object was re-created
    FORBIDDEN = "forbidden"  # RBAC: retrying will not help, an operator must
    INVALID = "invalid"  # the API rejected the content: a bug to report
    UNAVAILABLE = "unavailable"  # API errors, throttling, timeouts: retry with backoff
    NOT_LEADER = "not_leader"  # this manager is not (or no longer) the leader


class ActionFailure(msgspec.Struct, frozen=True):
    index: int
    kind: FailureKind
    message: str


class Ack(_Message, frozen=True, tag="ack"):
    id: ResultId
    failures: tuple[ActionFailure, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.failures


Message = (
    Delta
    | Heartbeat
    | Pause
    | Resume
    | Hello
    | Refused
    | Snapshot
    | WhoIs
    | Identity
    | WorkerMetrics
    | Result
    | Ack
)

ENCODER = msgspec.msgpack.Encoder()
DECODER: msgspec.msgpack.Decoder[Message] = msgspec.msgpack.Decoder(Message)


def encode(message: Message) -> bytes:
    return ENCODER.encode(message)


def decode(frame: bytes) -> Message:
    """Decode one frame; raises `msgspec.DecodeError` (or ValidationError) on a bad one."""
    return DECODER.decode(frame)
