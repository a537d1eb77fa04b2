"""The cloud's answers for many nodes waiting to be initialized, looked up together.

Upstream looks up each node alone: its server (a GET, or a list by name), its ports, its
flavor; 5,000 nodes registered at once cost 10,000 to 15,000 calls. Here the first sync of
an uninitialized node that finds no answer waiting asks the provider about every
uninitialized node of the replica at once (`Instances.instances_metadata`: on OpenStack one
paged server list and one port list per 50 servers), and each node's sync then takes its
own answer. What the batch cannot answer (a node whose server is missing, shares its name,
or was created after the listing; a batch that failed) is looked up alone, as upstream
does, and only that lookup's error reaches the node's Warning event.

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
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._instances = instances
        # The nodes waiting to be initialized (the replica's uninitialized nodes).
        self._waiting = waiting
        self._clock = clock
        self._lock = threading.Lock()
        # When each node was last asked about in a batch (answered or not).
        self._asked: dict[str, float] = {}
        # Answers not yet taken: the providerID the node had when asked, the metadata.
        self._answers: dict[str, tuple[str, InstanceMetadata]] = {}
        # Set when the batch in flight ends; None when none is.
        self._in_flight: threading.Event | None = None

    def metadata(self, node: Node) -> InstanceMetadata:
        """A waiting node's metadata: its answer from a batch (asking one for every waiting
        node when it has none), else from its own lookup."""
        answer = self.take(node)
        if answer is None and not self._recently_asked(node.name):
            self.ask(self._waiting)
            answer = self.take(node)
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
        """One batch for `nodes()` not asked about lately; a caller that finds a batch in
        flight waits for it instead."""
        with self._lock:
            flight = self._in_flight
            if flight is None:
                self._in_flight = threading.Event()
        if flight is not None:
            flight.wait()
            return
        try:
            self._ask(nodes())
        finally:
            with self._lock:
                done, self._in_flight = self._in_flight, None
            assert done is not None
            done.set()

    def _ask(self, waiting: Sequence[Node]) -> None:
        now = self._clock()
        with self._lock:
            self._asked = {n: at for n, at in self._asked.items() if now - at < MAX_AGE}
            self._answers = {n: a for n, a in self._answers.items() if n in self._asked}
            nodes = [node for node in waiting if node.name not in self._asked]
        if len(nodes) < BATCH_MIN:
            return
        try:
            answers = self._instances.instances_metadata(nodes=nodes)
        except ProviderError as error:
            log.warning("looking up %d nodes at once failed: %s; each alone", len(nodes), error)
            answers = {}
        # Answers age from the batch's end: a batch slowed by a busy cloud (a minute, seen
        # at 5,000 nodes) must not hand out answers already too old to take.
        done = self._clock()
        with self._lock:
            for node in nodes:
                self._asked[node.name] = done
                if node.name in answers:
                    self._answers[node.name] = (node.spec.provider_id, answers[node.name])
