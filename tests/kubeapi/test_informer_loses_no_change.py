"""The informer lists, watches, and after a 410 relists and emits the deletes it missed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from prometheus_client import REGISTRY

from pyccm.kubeapi.client import KubeClient
from pyccm.kubeapi.informer import NODES, SERVICES, Informer
from pyccm.manager.store import Cache
from pyccm.protocol.messages import Delta, SessionId
from pyccm.protocol.views import Node
from pyccm_sim.kube.testing import KubeSimHandle
from tests.support.waiting import eventually


def relists(cause: str) -> float:
    return (
        REGISTRY.get_sample_value(
            "pyccm_informer_relists_total", {"resource": "nodes", "cause": cause}
        )
        or 0.0
    )


def test_list_then_watch_fills_the_cache_and_follows_changes(
    kube: KubeSimHandle, client: KubeClient
) -> None:
    deltas: list[Delta] = []
    cache = Cache(
        session=SessionId("s"),
        publish=lambda channel, delta: deltas.append(delta) if channel == "route:node" else None,
    )
    informer = Informer(client=client, resource=NODES, sink=cache.nodes)
    informer.start()
    try:
        eventually(cache.nodes.synced.is_set)
        assert cache.nodes.keys() == {"node-0000", "node-0001", "node-0002"}
        kube.create("nodes", {"metadata": {"name": "late"}})
        eventually(lambda: "late" in cache.nodes.keys())  # noqa: SIM118 (a set, not a dict)
        kube.delete("nodes", "node-0000")
        eventually(lambda: "node-0000" not in cache.nodes.keys())  # noqa: SIM118 (a set, not a dict)
        assert [d.seq for d in deltas] == list(range(1, len(deltas) + 1))
    finally:
        informer.stop()
        kube.cut_watches()


def test_a_410_relists_and_emits_the_missed_delete(kube: KubeSimHandle, client: KubeClient) -> None:
    cache = Cache(session=SessionId("s"), publish=lambda channel, delta: None)
    informer = Informer(client=client, resource=NODES, sink=cache.nodes)
    informer.start()
    try:
        eventually(cache.nodes.synced.is_set)
        before = relists("gone")
        kube.expire_next_watches(1)
        kube.delete("nodes", "node-0001")
        kube.cut_watches()
        eventually(lambda: relists("gone") == before + 1)
        eventually(lambda: cache.nodes.keys() == {"node-0000", "node-0002"})
    finally:
        informer.stop()
        kube.cut_watches()


def test_services_decode_into_lean_views(kube: KubeSimHandle, client: KubeClient) -> None:
    cache = Cache(session=SessionId("s"), publish=lambda channel, delta: None)
    objects, version = Informer(client=client, resource=SERVICES, sink=cache.services).list_all()
    assert len(objects) == 2
    assert all(s.spec.type == "LoadBalancer" for s in objects)
    assert int(version) > 0


@dataclass
class Watched:
    informer: Informer[Node]
    cache: Cache
    pauses: list[float]  # every wait between attempts, as the informer asked for it


@contextmanager
def watched_nodes(kube: KubeSimHandle, client: KubeClient) -> Iterator[Watched]:
    """A node informer whose waits are recorded instead of slept, watching when yielded."""
    cache = Cache(session=SessionId("s"), publish=lambda channel, delta: None)
    pauses: list[float] = []
    informer = Informer(client=client, resource=NODES, sink=cache.nodes, pause=pauses.append)
    informer.start()
    try:
        eventually(informer.watching.is_set)
        yield Watched(informer=informer, cache=cache, pauses=pauses)
    finally:
        informer.stop()
        kube.cut_watches()


def test_a_watch_reset_mid_stream_reconnects_and_says_so_meanwhile(
    kube: KubeSimHandle, client: KubeClient
) -> None:
    # A TCP reset mid-stream raised urllib3's ProtocolError, which escaped the retry loop:
    # the watch thread died and no change was ever seen again.
    with watched_nodes(kube, client) as w:
        assert kube.cut_watches(reset=True) >= 1
        eventually(lambda: len(w.pauses) >= 1)  # the failure was seen and backed off
        kube.create("nodes", {"metadata": {"name": "after-reset"}})
        eventually(lambda: "after-reset" in w.cache.nodes.keys())  # noqa: SIM118 (a set, not a dict)
        eventually(w.informer.watching.is_set)
        assert watch_live() == 1.0


def test_410s_in_a_row_relist_with_growing_backoff(kube: KubeSimHandle, client: KubeClient) -> None:
    with watched_nodes(kube, client) as w:
        before = relists("gone")
        kube.expire_next_watches(4)
        kube.cut_watches()
        eventually(lambda: relists("gone") == before + 4)
        eventually(w.informer.watching.is_set)
        # The first 410 relists at once; the ones in a row after it back off, more each time.
        assert w.pauses[0] == 0.0
        assert all(p > 0 for p in w.pauses[1:4])
        assert max(w.pauses[1:4]) > min(w.pauses[1:4])


def watch_live() -> float:
    return REGISTRY.get_sample_value("pyccm_informer_watch_live", {"resource": "nodes"}) or 0.0
