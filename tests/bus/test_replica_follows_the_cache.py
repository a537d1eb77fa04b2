"""A worker's replica converges to the manager's cache through snapshot + sequenced deltas."""

from __future__ import annotations

import logging
import uuid

import pytest
import zmq
from prometheus_client import REGISTRY

from pyccm.protocol.messages import (
    PROTOCOL_VERSION,
    Delta,
    FailureKind,
    Hello,
    PatchNode,
    Refused,
    Seq,
    SessionId,
    Topic,
    decode,
    encode,
)
from tests.support.bus import Bus
from tests.support.nodes import node
from tests.support.waiting import eventually


def replica_names(replica_nodes: list[object]) -> set[str]:
    return {n.metadata.name for n in replica_nodes}  # type: ignore[attr-defined]


def test_snapshot_then_deltas_reproduce_the_cache(
    bus: Bus, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="pyccm.workers.runtime.bus")
    manager = bus.manager()
    manager.cache.nodes.upsert(node("a", 1))
    manager.cache.nodes.upsert(node("b", 2))
    client, replica = bus.worker()
    eventually(replica.synced.is_set)
    manager.cache.nodes.upsert(node("c", 3))
    manager.cache.nodes.delete("a")
    eventually(lambda: replica_names(replica.nodes()) == {"b", "c"})  # type: ignore[arg-type]
    # No delta was missed or out of order. (A manager whose heartbeat was late on a loaded
    # machine is asked again, "manager silent": that is not the sequencing's doing.)
    asked = [r.getMessage() for r in caplog.records if "new snapshot" in r.getMessage()]
    assert [m for m in asked if "manager silent" not in m] == []
    assert client.resnapshots == len(asked)


def test_a_gap_in_sequence_makes_the_worker_resnapshot(bus: Bus) -> None:
    manager = bus.manager()
    manager.cache.nodes.upsert(node("a", 1))
    client, replica = bus.worker()
    eventually(replica.synced.is_set)
    # A delta the worker never saw: sequence jumps from 1 to 3.
    manager.server.publish(
        "cloud-node:node",
        Delta(
            session=manager.session,
            topic=Topic.NODE,
            seq=Seq(3),
            key="ghost",
            node=node("ghost", 9),
        ),
    )
    eventually(lambda: client.resnapshots == 1)
    manager.cache.nodes.upsert(node("b", 2))
    eventually(lambda: replica_names(replica.nodes()) == {"a", "b"})  # type: ignore[arg-type]


def test_a_restarted_manager_is_followed_and_its_deletes_seen(bus: Bus) -> None:
    first = bus.manager()
    first.cache.nodes.upsert(node("old", 1))
    client, replica = bus.worker()
    eventually(lambda: replica_names(replica.nodes()) == {"old"})  # type: ignore[arg-type]
    bus.stop(first.server)
    second = bus.manager()
    second.cache.nodes.upsert(node("new", 1))
    eventually(lambda: replica_names(replica.nodes()) == {"new"})  # type: ignore[arg-type]
    assert client.resnapshots >= 1


def test_the_replica_is_not_synced_while_a_new_managers_snapshot_is_awaited(bus: Bus) -> None:
    first = bus.manager()
    first.cache.nodes.upsert(node("deleted-while-away", 1))
    client, replica = bus.worker()
    eventually(replica.synced.is_set)
    bus.stop(first.server)
    # A manager that is not serving (a standby): the worker must not trust its old replica.
    standby = bus.manager(serving=False)
    eventually(lambda: not replica.synced.is_set())
    assert replica_names(replica.nodes()) == {"deleted-while-away"}  # type: ignore[arg-type]
    standby.cache.nodes.upsert(node("current", 1))
    standby.server.serve(True)
    eventually(replica.synced.is_set)
    assert replica_names(replica.nodes()) == {"current"}  # type: ignore[arg-type]
    assert client.resnapshots >= 1


def test_a_result_is_acked_by_the_leader(bus: Bus) -> None:
    bus.manager()
    client, replica = bus.worker()
    eventually(replica.synced.is_set)
    ack = client.submit("a", (PatchNode(name="a", labels={"x": "y"}),)).result(timeout=5)
    assert ack.ok


def test_a_manager_that_does_not_lead_refuses_results(bus: Bus) -> None:
    manager = bus.manager()
    client, replica = bus.worker()
    eventually(replica.synced.is_set)
    manager.server.serve(False)
    ack = client.submit("a", (PatchNode(name="a"),)).result(timeout=5)
    assert [f.kind for f in ack.failures] == [FailureKind.NOT_LEADER]


def malformed(side: str) -> float:
    return REGISTRY.get_sample_value("pyccm_bus_malformed_frames_total", {"side": side}) or 0.0


def raw_dealer(bus: Bus) -> zmq.Socket[bytes]:
    sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.RCVTIMEO, 5000)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(bus.settings.router_address)
    return sock


def test_a_malformed_frame_is_counted_and_dropped(bus: Bus) -> None:
    bus.manager()
    before = malformed("manager")
    sock = raw_dealer(bus)
    sock.send(b"\xc1 not msgpack")
    eventually(lambda: malformed("manager") == before + 1)
    # The server still answers the next, well-formed, hello.
    sock.send(encode(Hello(session=SessionId("s"), worker="w", topics=(Topic.NODE,), view="route")))
    assert decode(sock.recv()).__class__.__name__ == "Snapshot"
    sock.close()


def test_a_hello_for_a_view_the_manager_does_not_have_is_refused_for_good(bus: Bus) -> None:
    bus.manager()
    sock = raw_dealer(bus)
    # The route controller reads no Services: there is no route view of them.
    hello = Hello(session=SessionId("s"), worker="w", topics=(Topic.SERVICE,), view="route")
    sock.send(encode(hello))
    reply = decode(sock.recv())
    assert isinstance(reply, Refused)
    assert reply.fatal
    assert reply.reason == "no view 'route' of service on this manager"
    sock.close()


def test_a_protocol_mismatch_is_refused_for_good(bus: Bus) -> None:
    bus.manager()
    sock = raw_dealer(bus)
    hello = Hello(
        session=SessionId(uuid.uuid4().hex), worker="w", topics=(), protocol=PROTOCOL_VERSION + 1
    )
    sock.send(encode(hello))
    reply = decode(sock.recv())
    assert isinstance(reply, Refused)
    assert reply.fatal
    assert f"protocol {PROTOCOL_VERSION + 1}" in reply.reason
    sock.close()


def test_a_worker_with_no_topics_is_seen_and_never_asks_for_snapshots(bus: Bus) -> None:
    # A disabled controller's worker: it subscribes to nothing but stays on the bus, so
    # the manager's /healthz sees it and it follows pause/resume.
    manager = bus.manager()
    client, _ = bus.worker("route", topics=())
    eventually(lambda: "route" in manager.server.workers())
    first = manager.server.workers()["route"].last_seen
    # Two more of its heartbeats: by then it has handled the manager's heartbeats too.
    eventually(lambda: manager.server.workers()["route"].last_seen > first + 1.5)
    assert client.resnapshots == 0
