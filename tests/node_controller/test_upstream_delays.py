"""Upstream's node_controller delays: one sample each per node, when the replica shows the
uninitialized taint gone, of the node's age (node creation → initialized)."""

from __future__ import annotations

import time

import msgspec
from prometheus_client import REGISTRY

from pyccm.logs import rfc3339
from pyccm.protocol.messages import Topic
from pyccm.protocol.views import Node
from pyccm.workers.node.controller import NodeController, NodeSettings
from pyccm.workers.runtime.controller import Obj
from pyccm.workers.runtime.replica import Replica
from pyccm_sim.fake_provider import FakeCloud
from tests.node_controller.test_initialization import make_node

TAINT = "node_controller_cloud_provider_taint_removal_delay_seconds"
SYNC = "node_controller_initial_node_sync_delay_seconds"


def samples() -> dict[str, float]:
    return {
        f"{name}_{part}": REGISTRY.get_sample_value(f"{name}_{part}") or 0.0
        for name in (TAINT, SYNC)
        for part in ("count", "sum")
    }


def created(node: Node, seconds_ago: float) -> Node:
    meta = msgspec.structs.replace(
        node.metadata, creation_timestamp=rfc3339(time.time() - seconds_ago)
    )
    return msgspec.structs.replace(node, metadata=meta)


def watched() -> Replica:
    """A replica whose changes go through the node controller's keys_for, as the runner's."""
    replica = Replica()
    instances = FakeCloud().instances()
    assert instances is not None
    controller = NodeController(replica=replica, instances=instances, settings=NodeSettings())

    def changed(topic: Topic, key: str, old: Obj | None, new: Obj | None) -> None:
        controller.keys_for(topic, key, old, new)

    replica.listen(changed)
    return replica


def test_an_initialized_node_observes_both_delays_once_with_its_age() -> None:
    replica = watched()
    before = samples()
    replica.apply(Topic.NODE, "n1", created(make_node(), 100))
    assert samples() == before  # still tainted
    untainted = created(make_node(tainted=False), 100)
    replica.apply(Topic.NODE, "n1", untainted)
    replica.apply(Topic.NODE, "n1", msgspec.structs.replace(untainted, status=untainted.status))
    after = samples()
    for name in (TAINT, SYNC):
        assert after[f"{name}_count"] - before[f"{name}_count"] == 1
        # Its age at the removal: 100 s, plus the test's own time (well under a minute).
        assert 100 <= after[f"{name}_sum"] - before[f"{name}_sum"] < 160


def test_a_node_that_never_had_the_taint_observes_nothing() -> None:
    replica = watched()
    before = samples()
    node = created(make_node(tainted=False), 100)
    replica.apply(Topic.NODE, "n1", node)
    replica.apply(Topic.NODE, "n1", created(make_node(tainted=False, labels={"a": "b"}), 100))
    assert samples() == before
