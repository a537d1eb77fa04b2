"""The Clone pattern's client half (runtime/clone.py) without sockets: what reaches the
replica, when it may be read, and when the worker must ask for new snapshots."""

from __future__ import annotations

import pytest

from pyccm.protocol.messages import Delta, Heartbeat, Seq, SessionId, Snapshot, Topic
from pyccm.protocol.views import Node, NodeSpec, OwnerMeta, Service
from pyccm.workers.runtime.clone import NOTHING, Clone, Step
from pyccm.workers.runtime.replica import Replica

A = SessionId("manager-a")
B = SessionId("manager-b")
NODES = "cloud-node:node"
CHANNELS = {Topic.NODE: NODES}


def node(name: str, rv: int = 1) -> Node:
    return Node(
        metadata=OwnerMeta(name=name, uid=f"uid-{name}", resource_version=str(rv)),
        spec=NodeSpec(),
    )


def delta(seq: int, name: str, *, session: SessionId = A, deleted: bool = False) -> Delta:
    return Delta(
        session=session,
        topic=Topic.NODE,
        seq=Seq(seq),
        key=name,
        node=None if deleted else node(name, seq),
    )


def snapshot(seq: int, *names: str, session: SessionId = A, topic: Topic = Topic.NODE) -> Snapshot:
    return Snapshot(
        session=session, topic=topic, seq=Seq(seq), nodes=tuple(node(n, seq) for n in names)
    )


class Machine:
    """A Clone over a real replica, started as the bus client starts it; `applied` counts
    the deltas it applied (the bus client's pyccm_bus_deltas_received_total)."""

    def __init__(self, channels: dict[Topic, str] = CHANNELS) -> None:
        self.replica = Replica()
        self.applied: list[Topic] = []
        self.clone = Clone(channels=channels, replica=self.replica, applied=self.applied.append)
        self.clone.restart()

    def names(self) -> dict[str, str]:
        """Each node's name and resourceVersion (the seq of the change that wrote it)."""
        return {n.name: n.metadata.resource_version for n in self.replica.nodes()}


@pytest.fixture
def synced() -> Machine:
    """Synced from manager A at seq 5 with nodes a and b."""
    machine = Machine()
    assert machine.clone.snapshot(snapshot(5, "a", "b")) == Step(taken=True, synced=True)
    return machine


def test_the_replica_is_not_read_until_the_snapshot_is_in() -> None:
    machine = Machine()
    assert machine.clone.awaiting
    assert not machine.replica.synced.is_set()
    assert machine.clone.snapshot(snapshot(5, "a")) == Step(taken=True, synced=True)
    assert machine.replica.synced.is_set()
    assert machine.names() == {"a": "5"}
    assert machine.clone.manager == A


def test_deltas_in_order_are_applied_and_reported_in_heartbeats(synced: Machine) -> None:
    assert synced.clone.delta(delta(6, "c")) == NOTHING
    assert synced.clone.delta(delta(7, "a", deleted=True)) == NOTHING
    assert synced.names() == {"b": "5", "c": "6"}
    assert synced.applied == [Topic.NODE, Topic.NODE]
    assert synced.clone.channel_seqs() == {NODES: Seq(7)}


def test_a_duplicate_or_older_delta_is_ignored(synced: Machine) -> None:
    synced.clone.delta(delta(6, "c"))
    assert synced.clone.delta(delta(6, "c")) == NOTHING
    assert synced.clone.delta(delta(4, "old")) == NOTHING
    assert synced.names() == {"a": "5", "b": "5", "c": "6"}
    assert synced.applied == [Topic.NODE]


def test_a_gap_starts_over_and_the_replica_may_not_be_read(synced: Machine) -> None:
    step = synced.clone.delta(delta(8, "c"))
    assert step == Step(resync="gap on node: 6 -> 8")
    assert synced.clone.awaiting
    assert not synced.replica.synced.is_set()
    # What comes meanwhile waits for the new snapshot.
    assert synced.clone.delta(delta(9, "d")) == NOTHING
    assert synced.clone.snapshot(snapshot(8, "a", "b", "c")) == Step(taken=True, synced=True)
    assert synced.names() == {"a": "8", "b": "8", "c": "8", "d": "9"}


def test_deltas_buffered_before_the_snapshot_apply_only_when_newer() -> None:
    machine = Machine()
    for seq, name in ((4, "a"), (5, "b"), (6, "c"), (7, "d")):
        assert machine.clone.delta(delta(seq, name)) == NOTHING
    assert machine.names() == {}
    machine.clone.snapshot(snapshot(5, "a", "b"))
    assert machine.names() == {"a": "5", "b": "5", "c": "6", "d": "7"}
    assert machine.applied == [Topic.NODE, Topic.NODE]


def test_a_gap_among_buffered_deltas_starts_over_and_keeps_the_later_ones() -> None:
    machine = Machine()
    for seq, name in ((6, "c"), (8, "e"), (9, "f")):
        machine.clone.delta(delta(seq, name))
    step = machine.clone.snapshot(snapshot(5, "a"))
    assert step == Step(taken=True, resync="gap on node: 7 -> 8")
    assert not machine.replica.synced.is_set()
    # The deltas after the gap wait for the next snapshot, which makes the older stale.
    assert machine.clone.snapshot(snapshot(8, "a", "c", "e")) == Step(taken=True, synced=True)
    assert machine.names() == {"a": "8", "c": "8", "e": "8", "f": "9"}


def test_buffered_deltas_of_another_session_are_dropped() -> None:
    machine = Machine()
    machine.clone.delta(delta(6, "stale", session=B))
    machine.clone.snapshot(snapshot(5, "a"))
    assert machine.names() == {"a": "5"}


def test_a_snapshot_nobody_waits_for_is_ignored(synced: Machine) -> None:
    assert synced.clone.snapshot(snapshot(9, "z")) == NOTHING
    assert synced.names() == {"a": "5", "b": "5"}
    assert synced.clone.channel_seqs() == {NODES: Seq(5)}


def test_snapshots_of_two_sessions_are_not_mixed() -> None:
    channels = {Topic.NODE: "service:node", Topic.SERVICE: "service:service"}
    machine = Machine(channels)
    assert machine.clone.snapshot(snapshot(3, "a")) == Step(taken=True)
    # The service snapshot comes from a restarted manager: the node one must come again.
    services = Snapshot(session=B, topic=Topic.SERVICE, seq=Seq(1), services=())
    assert machine.clone.snapshot(services) == Step(taken=True)
    assert machine.clone.awaiting
    assert machine.clone.snapshot(snapshot(4, "b", session=B)) == Step(taken=True, synced=True)
    assert machine.clone.manager == B
    assert machine.names() == {"b": "4"}


def test_a_delta_from_another_session_starts_over(synced: Machine) -> None:
    assert synced.clone.delta(delta(6, "c", session=B)) == Step(resync="manager restarted")
    assert synced.names() == {"a": "5", "b": "5"}
    assert not synced.replica.synced.is_set()


def test_a_delta_of_a_topic_not_subscribed_is_foreign(synced: Machine) -> None:
    service = Delta(
        session=A,
        topic=Topic.SERVICE,
        seq=Seq(6),
        key="ns/s",
        service=Service(metadata=OwnerMeta(name="s", namespace="ns", uid="u")),
    )
    assert synced.clone.delta(service) == Step(foreign=True)
    assert synced.clone.channel_seqs() == {NODES: Seq(5)}


@pytest.mark.parametrize(
    ("beat", "step"),
    [
        (Heartbeat(session=A, seqs={NODES: Seq(5)}), NOTHING),
        (Heartbeat(session=A, seqs={NODES: Seq(7)}), Step(resync="missed deltas on node")),
        (Heartbeat(session=B, seqs={NODES: Seq(5)}), Step(resync="manager restarted")),
    ],
    ids=["up to date", "announces deltas never seen", "another session"],
)
def test_a_heartbeat_checks_the_sequence(synced: Machine, beat: Heartbeat, step: Step) -> None:
    assert synced.clone.heartbeat(beat) == step
    assert synced.replica.synced.is_set() == (step == NOTHING)


def test_a_heartbeat_while_waiting_for_snapshots_changes_nothing() -> None:
    machine = Machine()
    assert machine.clone.heartbeat(Heartbeat(session=A, seqs={NODES: Seq(9)})) == NOTHING
    assert machine.clone.awaiting


def test_a_worker_without_topics_is_synced_by_its_managers_heartbeat() -> None:
    machine = Machine({})
    assert not machine.clone.awaiting
    assert machine.clone.heartbeat(Heartbeat(session=A, seqs={})) == Step(synced=True)
    assert machine.clone.manager == A
