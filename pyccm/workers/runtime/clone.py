"""The Clone pattern's client half (docs/architecture.md#bus-clone) as a state machine: no sockets,
no clock.

A worker subscribes first, then asks for a snapshot of each of its topics; the deltas that
arrive meanwhile are buffered, and once every snapshot is in, those newer than their
topic's snapshot are applied. From then on every delta must carry the next sequence number
of its topic and the manager's session. A gap, a new session, or a heartbeat announcing
deltas this worker never saw mean the replica can no longer be trusted: the machine starts
over (`restart`) and tells the caller to ask for new snapshots. The replica then emits only
the difference, so nothing is lost or replayed twice.

The machine owns the replica's contents and its `synced` flag (no sync may read a replica
that waits for snapshots: it could hold objects the API no longer has). The caller owns
the sockets: it asks for snapshots when told, and on its own when the manager goes silent
or the worker moves to another manager (`restart`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pyccm.protocol.messages import Delta, Heartbeat, Seq, SessionId, Snapshot, Topic
from pyccm.workers.runtime.replica import Replica


@dataclass(frozen=True)
class Step:
    """What a message means to the caller, besides what the machine did to the replica."""

    # A delta of a topic this worker did not subscribe to (a malformed stream: dropped).
    foreign: bool = False
    # A snapshot the machine was waiting for (its `paused` flag counts).
    taken: bool = False
    # The replica just became complete (for a worker without topics: its manager is
    # alive and serving), so the wait for the manager is over.
    synced: bool = False
    # Ask the manager for new snapshots, for this reason; the machine already started over.
    resync: str = ""


NOTHING = Step()


class Clone:
    """One worker's sequence state: the manager session its replica comes from, the last
    sequence number applied per topic, the topics still waiting for a snapshot, and the
    deltas buffered meanwhile. Used by one thread (the bus thread)."""

    def __init__(
        self,
        *,
        channels: Mapping[Topic, str],
        replica: Replica,
        applied: Callable[[Topic], None] = lambda topic: None,
    ) -> None:
        # Topic -> this worker's channel name for it (protocol.projections), in the
        # worker's order; heartbeats count deltas by channel.
        self._channels = dict(channels)
        self._replica = replica
        self._applied = applied
        self.manager: SessionId | None = None
        self.seqs: dict[Topic, Seq] = {}
        self._awaiting: set[Topic] = set()
        self._buffer: list[Delta] = []

    @property
    def awaiting(self) -> bool:
        """Some snapshot is still due."""
        return bool(self._awaiting)

    def channel_seqs(self) -> dict[str, Seq]:
        """The last sequence number applied per channel, as a heartbeat reports them."""
        return {self._channels[topic]: seq for topic, seq in self.seqs.items()}

    def restart(self) -> None:
        """Wait for a new snapshot of every topic; until then the replica may not be read."""
        self._awaiting = set(self._channels)
        self._buffer = []
        if self._channels:
            self._replica.synced.clear()

    def delta(self, delta: Delta) -> Step:
        if delta.topic not in self._channels:
            return Step(foreign=True)
        if self._awaiting:
            self._buffer.append(delta)
            return NOTHING
        if delta.session != self.manager:
            return self._resync("manager restarted")
        expected = self.seqs.get(delta.topic, Seq(0)) + 1
        if delta.seq < expected:
            return NOTHING  # seen already: a duplicate, or older than its snapshot
        if delta.seq > expected:
            return self._resync(f"gap on {delta.topic.value}: {expected} -> {delta.seq}")
        self.seqs[delta.topic] = delta.seq
        self._applied(delta.topic)
        self._replica.apply(delta.topic, delta.key, delta.node or delta.service)
        return NOTHING

    def snapshot(self, snapshot: Snapshot) -> Step:
        if snapshot.topic not in self._awaiting:
            return NOTHING  # not asked for (a reply to an earlier hello), or already in
        if self.manager is not None and snapshot.session != self.manager:
            # Snapshots from two manager sessions must not be mixed.
            self._awaiting = set(self._channels)
        self.manager = snapshot.session
        self._awaiting.discard(snapshot.topic)
        self.seqs[snapshot.topic] = snapshot.seq
        self._replica.replace(snapshot.topic, snapshot.nodes or snapshot.services)
        if self._awaiting:
            return Step(taken=True)
        return self._replay()

    def heartbeat(self, beat: Heartbeat) -> Step:
        if self._awaiting:
            return NOTHING
        if not self._channels:
            # A worker with no topics (a disabled controller) has nothing to snapshot; it
            # only follows the manager for pause/resume and sends its own heartbeats.
            self.manager = beat.session
            return Step(synced=True)
        if beat.session != self.manager:
            return self._resync("manager restarted")
        for topic, name in self._channels.items():
            if beat.seqs.get(name, Seq(0)) > self.seqs.get(topic, Seq(0)):
                return self._resync(f"missed deltas on {topic.value}")
        return NOTHING

    def _resync(self, reason: str) -> Step:
        self.restart()
        return Step(resync=reason)

    def _replay(self) -> Step:
        """The last snapshot is in: apply the buffered deltas of its session. A gap among
        them starts over at once, and the deltas after it are buffered again, for the next
        snapshots to sort out."""
        resync = ""
        buffered, self._buffer = self._buffer, []
        for delta in buffered:
            if delta.session == self.manager:
                step = self.delta(delta)  # after a gap: buffered again
                resync = resync or step.resync
        if self._awaiting:
            return Step(taken=True, resync=resync)
        self._replica.synced.set()
        return Step(taken=True, synced=True)
