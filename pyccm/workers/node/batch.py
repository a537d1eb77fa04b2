"""The cloud's answers for many nodes waiting to be initialized, looked up together.

Upstream looks up each node alone: its server (a GET, or a list by name), its ports, its
flavor; 5,000 nodes registered at once cost 10,000 to 15,000 calls. Here the first sync of
an uninitialized node that finds no answer waiting asks the provider about every
uninitialized node of the replica at once (`Instances.instances_metadata`: on OpenStack one
paged server list and one port list per 50 servers) on a thread of its own, and returns.
Answers land a chunk at a time (on OpenStack: a server page and one port list), and the
nodes of each chunk are queued again as it lands, so each node's sync takes its own answer
while the rest are still being fetched; no sync thread waits for the batch. What the batch
cannot answer (a node whose server is missing, shares its name, or was created after the
listing; a chunk or a batch that failed) is queued again when the batch ends and looked up
alone, as upstream does, and only that lookup's error reaches the node's Warning event
(and its backoff).

The periodic address refresh asks about every initialized node the same way before it
queues them (5,000 nodes: 5 + 100 calls instead of 10,000 every
`--node-status-update-frequency`, and at each start).

Bounds: fewer than `BATCH_MIN` nodes waiting are each looked up alone (a listing of a
large project costs more than a few lookups); an answer is used for at most `MAX_AGE`
seconds after the batch that gave it ended, and only while the node's providerID is the one it
was asked about; a node is in at most one batch per `MAX_AGE`, so a node that keeps
failing (no server, a provided-node-ip mismatch) is retried alone, never in a new batch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from pyccm.protocol.views import Node
from pyccm.provider.errors import ProviderError
from pyccm.provider.interface import InstanceMetadata, Instances

# Nodes waiting below this are looked up alone: 2 calls each at most 18, about the pages of
# one listing of a 5,000-server project, and far fewer bytes.
BATCH_MIN = 10
# How long an answer of a batch stands in for the node's own lookup.
MAX_AGE = 30.0

log = logging.getLogger(__name__)


class MetadataBatch:
    def __init__(
        self,
        *,
        instances: Instances,
        waiting: Callable[[], Sequence[Node]],
        landed: Callable[[list[str]], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._instances = instances
        # The nodes waiting to be initialized (the replica's uninitialized nodes).
        self._waiting = waiting
        # Called with the names of the nodes deferred (below) whose answer (or its absence) is in.
        self._landed = landed
        self._clock = clock
        self._lock = threading.Lock()
        # When each node was last asked about in a batch (answered or not).
        self._asked: dict[str, float] = {}
        # Answers not yet taken: the providerID the node had when asked, the metadata.
        self._answers: dict[str, tuple[str, InstanceMetadata]] = {}
        # The batch in flight: each node's providerID as asked, until its answer is in.
        self._pending: dict[str, str] = {}
        # Nodes of the batch whose sync found their answer on its way: only they are named
        # to `landed` (a node still in its queue takes its answer when its turn comes; named
        # again, it would be synced twice and the second sync would look it up alone).
        self._deferred: set[str] = set()
        self._in_flight = False
        self._idle = threading.Condition(self._lock)

    def metadata(self, node: Node) -> InstanceMetadata | None:
        """A waiting node's metadata: its answer from a batch, else from its own lookup; or
        None while a batch's answer for it is on its way (asking one for every waiting node
        when it has none): `landed` names the node when its answer is in."""
        answer = self.take(node)
        if answer is not None:
            return answer
        if not self._recently_asked(node.name):
            self._start(self._waiting)
        with self._lock:
            if node.name in self._pending:
                self._deferred.add(node.name)
                return None
        answer = self.take(node)  # landed since the first look
        return answer if answer is not None else self._instances.instance_metadata(node=node)

    def take(self, node: Node) -> InstanceMetadata | None:
        """The node's answer from a batch, if a fresh one is waiting (once)."""
        with self._lock:
            answer = self._answers.pop(node.name, None)
            fresh = self._fresh(node.name)
        if answer is None or not fresh or answer[0] != node.spec.provider_id:
            return None
        return answer[1]

    def _fresh(self, name: str) -> bool:
        asked = self._asked.get(name)
        return asked is not None and self._clock() - asked < MAX_AGE

    def _recently_asked(self, name: str) -> bool:
        with self._lock:
            return self._fresh(name)

    def ask(self, nodes: Callable[[], Sequence[Node]]) -> None:
        """One batch for `nodes()` not asked about lately, or the one in flight; returns
        when it has ended."""
        self._start(nodes)
        self.wait()

    def wait(self) -> None:
        """Returns when no batch is in flight."""
        with self._idle:
            self._idle.wait_for(lambda: not self._in_flight)

    def _start(self, nodes: Callable[[], Sequence[Node]]) -> None:
        """A batch for `nodes()` not asked about lately, on a thread of its own, unless one
        is in flight."""
        with self._lock:
            if self._in_flight:
                return
            self._in_flight = True
        asked = self._unasked(nodes())
        with self._lock:
            if len(asked) < BATCH_MIN:
                self._in_flight = False
                self._idle.notify_all()
                return
            self._pending = {node.name: node.spec.provider_id for node in asked}
        threading.Thread(target=self._run, args=(asked,), name="node-batch", daemon=True).start()

    def _unasked(self, nodes: Sequence[Node]) -> list[Node]:
        now = self._clock()
        with self._lock:
            self._asked = {n: at for n, at in self._asked.items() if now - at < MAX_AGE}
            self._answers = {n: a for n, a in self._answers.items() if n in self._asked}
            return [node for node in nodes if node.name not in self._asked]

    def _run(self, nodes: list[Node]) -> None:
        try:
            self._instances.instances_metadata(nodes=nodes, deliver=self._deliver)
        except ProviderError as error:
            log.warning("looking up %d nodes at once failed: %s; each alone", len(nodes), error)
        except Exception:
            log.exception("looking up %d nodes at once failed; each alone", len(nodes))
        finally:
            # Nodes the batch did not answer are looked up alone, and not in a new batch.
            # Every answer ages from the batch's end: a batch slowed by a busy cloud (a
            # minute, seen at 5,000 nodes) must not hand out answers already too old to take,
            # nor those of its first chunks, which wait while the nodes ahead of theirs in
            # the queue are written (a 5,000-node batch's answers are taken over 30 s).
            done = self._clock()
            with self._lock:
                rest = [name for name in self._pending if name in self._deferred]
                self._asked.update(dict.fromkeys((node.name for node in nodes), done))
                self._deferred.clear()
                self._pending = {}
                self._in_flight = False
                self._idle.notify_all()
            self._landed(rest)

    def _deliver(self, answers: dict[str, InstanceMetadata]) -> None:
        # Fresh from now until the batch ends, then from its end (`_run`).
        now = self._clock()
        with self._lock:
            landed = [name for name in answers if name in self._pending]
            for name in landed:
                self._answers[name] = (self._pending.pop(name), answers[name])
                self._asked[name] = now
            names = [name for name in landed if name in self._deferred]
            self._deferred.difference_update(names)
        self._landed(names)
