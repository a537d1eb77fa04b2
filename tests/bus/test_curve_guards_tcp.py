"""Over tcp:// the bus talks CURVE: known workers replicate the cache, nobody else hears a thing."""

from __future__ import annotations

import shutil
import time
import uuid
from dataclasses import replace
from pathlib import Path

import zmq

from pyccm.flags.addresses import load_client_curve, load_server_curve
from pyccm.manager.bus import BusSettings
from pyccm.protocol.messages import Hello, SessionId, Topic, encode
from pyccm.workers.runtime.replica import Replica
from tests.support.bus import Bus, KeyDirs
from tests.support.nodes import node
from tests.support.waiting import eventually

# How long a party the manager must not serve gets to prove it: several hello retries
# (1 s apart) and heartbeats. The assertion is that nothing arrives, so this is a bound
# on the test's patience, not a timing the system must meet.
SHUT_OUT_FOR = 2.5


def names(replica: Replica) -> set[str]:
    return {n.metadata.name for n in replica.nodes()}


def stays_empty(replica: Replica, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if replica.synced.is_set() or replica.nodes():
            return False
        time.sleep(0.05)
    return True


def test_an_authorized_worker_gets_the_snapshot_and_then_deltas_over_tcp(
    tcp_bus: Bus, keys: KeyDirs
) -> None:
    manager = tcp_bus.manager()
    manager.cache.nodes.upsert(node("a", 1))
    client, replica = tcp_bus.worker(curve=load_client_curve(keys.worker))
    eventually(replica.synced.is_set)
    assert names(replica) == {"a"}
    manager.cache.nodes.upsert(node("b", 2))
    manager.cache.nodes.delete("a")
    eventually(lambda: names(replica) == {"b"})
    assert client.resnapshots == 0
    assert "node" in manager.server.workers()


def test_curve_also_works_over_ipc_when_keys_are_given(tmp_path: Path, keys: KeyDirs) -> None:
    bus = Bus(
        BusSettings(
            pub_address=f"ipc://{tmp_path}/pub",
            router_address=f"ipc://{tmp_path}/router",
            curve=load_server_curve(keys.manager),
        )
    )
    try:
        manager = bus.manager()
        manager.cache.nodes.upsert(node("a", 1))
        _, replica = bus.worker(curve=load_client_curve(keys.worker))
        eventually(lambda: replica.synced.is_set() and names(replica) == {"a"})
    finally:
        bus.close()


def test_a_worker_whose_key_the_manager_does_not_know_gets_nothing(
    tcp_bus: Bus, keys: KeyDirs
) -> None:
    manager = tcp_bus.manager()
    manager.cache.nodes.upsert(node("a", 1))
    refused, stranger = tcp_bus.worker("stranger", curve=load_client_curve(keys.stranger))
    accepted, known = tcp_bus.worker("node", curve=load_client_curve(keys.worker))
    eventually(known.synced.is_set)
    manager.cache.nodes.upsert(node("b", 2))
    eventually(lambda: names(known) == {"a", "b"})
    assert stays_empty(stranger, SHUT_OUT_FOR)
    # Its hellos and heartbeats never got through the handshake either.
    assert set(manager.server.workers()) == {"node"}
    # ... and it knows why, instead of looking like a manager that never answers.
    assert refused.handshake_failures > 0
    assert accepted.handshake_failures == 0


def test_a_worker_holding_the_wrong_server_key_gets_nothing(tcp_bus: Bus, keys: KeyDirs) -> None:
    manager = tcp_bus.manager()
    manager.cache.nodes.upsert(node("a", 1))
    # A known worker key, but it trusts another manager's public key.
    curve = load_client_curve(keys.worker)
    impostor = load_client_curve(keys.stranger).public_key
    client, replica = tcp_bus.worker(curve=replace(curve, server_key=impostor))
    assert stays_empty(replica, SHUT_OUT_FOR)
    assert manager.server.workers() == {}
    assert client.handshake_failures > 0


def test_a_plain_zeromq_client_without_curve_hears_nothing_on_the_tcp_ports(
    tcp_bus: Bus,
) -> None:
    manager = tcp_bus.manager()
    manager.cache.nodes.upsert(node("a", 1))
    context = zmq.Context()
    sub = context.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(tcp_bus.settings.pub_address)
    dealer = context.socket(zmq.DEALER)
    dealer.connect(tcp_bus.settings.router_address)
    hello = Hello(session=SessionId(uuid.uuid4().hex), worker="intruder", topics=(Topic.NODE,))
    poller = zmq.Poller()
    poller.register(sub, zmq.POLLIN)
    poller.register(dealer, zmq.POLLIN)
    try:
        # A DEALER queues the hello until a connection completes; at close (linger 0) an
        # unsent one is dropped.
        dealer.send(encode(hello))
        # Heartbeats go out every second and a served hello is answered at once.
        heard = poller.poll(int(SHUT_OUT_FOR * 1000))
    finally:
        sub.close(linger=0)
        dealer.close(linger=0)
        context.term()
    assert heard == []
    assert manager.server.workers() == {}


def test_a_worker_key_added_to_the_authorized_dir_is_accepted_without_a_manager_restart(
    tcp_bus: Bus, keys: KeyDirs
) -> None:
    manager = tcp_bus.manager()
    manager.cache.nodes.upsert(node("a", 1))
    shutil.copy(keys.stranger_public, keys.manager / "authorized" / "newcomer.key")
    _, replica = tcp_bus.worker("newcomer", curve=load_client_curve(keys.stranger))
    eventually(lambda: replica.synced.is_set() and names(replica) == {"a"})
