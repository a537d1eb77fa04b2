"""Which nodes back a load balancer, and which shard owns a key.

Pure functions of the lean views (upstream's predicates:
docs/upstream.md#service-controller), kept apart from the sync so they can be read and
tested on their own (`pyccm plan` and the benches use them too). What
a Service wants, and what a sync must do about it, is `decision.py`.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from pyccm.protocol.projections import LB_FINALIZER
from pyccm.protocol.views import Node

FINALIZER = LB_FINALIZER

EXCLUDE_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"
AUTOSCALER_TAINT = "ToBeDeletedByClusterAutoscaler"

# The values Go's strconv.ParseBool reads as false: only these keep a labelled node in.
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def is_backend(node: Node) -> bool:
    """Upstream's stable node-set predicates: not being deleted, not excluded by label, not
    marked for removal by the cluster autoscaler. Readiness, cordons and roles do not count."""
    if node.metadata.deletion_timestamp is not None:
        return False
    if node.has_taint(AUTOSCALER_TAINT):
        return False
    # Absent or false includes; true excludes, and so does anything ParseBool rejects
    # (the empty string included), as upstream.
    value = node.metadata.labels.get(EXCLUDE_LABEL)
    return value is None or value in _FALSE


BackendId = tuple[str, str, tuple[tuple[str, str], ...]]


def backend_id(node: Node | None) -> BackendId | None:
    """What a load balancer's member set depends on: the name, providerID and addresses of
    a backend node; None when the node is not a backend. Upstream watches the first two
    only; the addresses are here because a member is a node's address: the cloud node
    controller sets them in a write of their own after the providerID, and a node whose
    addresses came after the sweep of its providerID would otherwise stay out of every
    pool (or keep a stale address) until some other node changed."""
    if node is None or not is_backend(node):
        return None
    addresses = tuple((a.type, a.address) for a in node.status.addresses)
    return (node.name, node.spec.provider_id, addresses)


@dataclass(frozen=True)
class Shard:
    """`--shard i/n`: this process owns the Service keys whose stable hash is i mod n."""

    index: int = 0
    count: int = 1

    @classmethod
    def parse(cls, value: str) -> Shard:
        """`i/n` with 0 <= i < n; ValueError with the reason otherwise."""
        index, sep, count = value.partition("/")
        if not sep or not index.strip().isdigit() or not count.strip().isdigit():
            raise ValueError(f"--shard {value!r}: expected i/n, e.g. 0/2")
        shard = cls(int(index), int(count))
        if shard.count < 1 or not 0 <= shard.index < shard.count:
            raise ValueError(f"--shard {value!r}: need 0 <= i < n")
        return shard

    def owns(self, key: str) -> bool:
        # crc32: stable across processes and Python versions (hash() is salted per process).
        return self.count == 1 or zlib.crc32(key.encode()) % self.count == self.index

    @property
    def suffix(self) -> str:
        """The worker's name suffix: empty for a single shard."""
        return "" if self.count == 1 else f"-{self.index}"
