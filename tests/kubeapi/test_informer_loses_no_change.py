"""The informer lists, watches, and after a 410 relists and emits the deletes it missed."""

from __future__ import annotations

from prometheus_client import REGISTRY

from kubeapi.client import KubeClient
from kubeapi.informer import NODES, SERVICES, Informer
from manager.store import Cache
from protocol.messages import Delta, SessionId
from sim.kube.testing import KubeSimHandle
from tests.bus.conftest import eventually


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
    cache = Cache(session=SessionId("s"), publish=deltas.append)
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
    cache = Cache(session=SessionId("s"), publish=lambda delta: None)
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
    cache = Cache(session=SessionId("s"), publish=lambda delta: None)
    objects, version = Informer(client=client, resource=SERVICES, sink=cache.services).list_all()
    assert len(objects) == 2
    assert all(s.spec.type == "LoadBalancer" for s in objects)
    assert int(version) > 0
