"""Split mode's discovery, one process: a worker that reaches a standby, or the leader at an
address it does not advertise, moves both sockets to the leader's advertised addresses;
when that manager goes silent or refuses without naming another, it goes back to its seeds.

The managers here are BusServers on ipc:// (no CURVE needed), each told where the leader is
the way the manager app tells them (from the Lease); two paths to one socket (a symlink)
stand in for a Service address and the pod address behind it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import pytest
from prometheus_client import REGISTRY

from pyccm.manager.bus import BusServer, BusSettings, WorkerIdentity
from pyccm.manager.store import Cache
from pyccm.protocol.messages import Ack, Delta, Hello, Refused, Result, SessionId, Topic, decode
from pyccm.protocol.messages import encode as encode_message
from pyccm.workers.runtime.bus import BusClient, BusClientSettings
from pyccm.workers.runtime.replica import Replica
from tests.support.nodes import node
from tests.support.waiting import eventually

Endpoints = tuple[str, str]
# The worker gives up on a silent manager after this (3 s in production).
SILENCE = 1.0


@dataclass
class Replicas:
    """Managers and workers of one test, stopped at its end."""

    directory: Path
    started: list[BusServer | BusClient] = field(default_factory=list)

    def endpoints(self, name: str) -> Endpoints:
        return f"ipc://{self.directory}/{name}-pub", f"ipc://{self.directory}/{name}-router"

    def manager(
        self,
        name: str,
        *,
        nodes: tuple[str, ...] = (),
        serving: bool,
        leader: Callable[[], Endpoints | None] = lambda: None,
    ) -> BusServer:
        session = SessionId(uuid.uuid4().hex)
        holder: list[BusServer] = []

        def ack(identity: WorkerIdentity, result: Result) -> None:
            holder[0].send(identity, Ack(session=session, id=result.id))

        def publish(channel: str, delta: Delta) -> None:
            holder[0].publish(channel, delta)

        cache = Cache(session=session, publish=publish)
        pub, router = self.endpoints(name)
        settings = BusSettings(pub_address=pub, router_address=router, advertise=(pub, router))
        server = BusServer(
            settings=settings, session=session, cache=cache, on_result=ack, leader_bus=leader
        )
        holder.append(server)
        for index, name_of_node in enumerate(nodes):
            cache.nodes.upsert(node(name_of_node, index + 1))
        cache.nodes.synced.set()
        cache.services.synced.set()
        server.serve(serving)
        server.start()
        self.started.append(server)
        return server

    def worker(
        self, seeds: Endpoints, *, topics: tuple[Topic, ...] = (Topic.NODE,)
    ) -> tuple[BusClient, Replica]:
        replica = Replica()
        client = BusClient(
            settings=BusClientSettings(
                pub_address=seeds[0], router_address=seeds[1], silence_timeout=SILENCE
            ),
            worker="node",
            session=SessionId(uuid.uuid4().hex),
            view="cloud-node",
            topics=topics,
            replica=replica,
        )
        client.start()
        self.started.append(client)
        return client, replica

    def stop(self, part: BusServer | BusClient) -> None:
        part.stop()
        self.started.remove(part)


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[Replicas]:
    wiring = Replicas(tmp_path)
    yield wiring
    for part in wiring.started:
        part.stop()


def names(replica: Replica) -> set[str]:
    return {n.metadata.name for n in replica.nodes()}


def leader_changes() -> float:
    return REGISTRY.get_sample_value("pyccm_bus_leader_changes_total", {"worker": "node"}) or 0.0


def test_a_worker_seeded_with_a_standby_syncs_with_the_leader(replicas: Replicas) -> None:
    a = replicas.endpoints("a")
    leader = replicas.manager("a", nodes=("from-leader",), serving=True)
    replicas.manager("b", nodes=("from-standby",), serving=False, leader=lambda: a)
    counted = leader_changes()
    client, replica = replicas.worker(replicas.endpoints("b"))
    eventually(replica.synced.is_set)
    assert names(replica) == {"from-leader"}
    assert client.endpoints == a
    assert client.leader_changes == 1
    assert leader_changes() == counted + 1
    assert "node" in leader.workers()


def test_the_leader_sends_a_worker_that_dialled_another_address_to_its_own(
    replicas: Replicas, tmp_path: Path
) -> None:
    replicas.manager("a", nodes=("n",), serving=True)
    pub, router = replicas.endpoints("a")
    # A second name for the same sockets, as a Service's address is for the pod behind it.
    for address in (pub, router):
        Path(address.removeprefix("ipc://") + "-via-service").symlink_to(
            address.removeprefix("ipc://")
        )
    service = (pub + "-via-service", router + "-via-service")
    client, replica = replicas.worker(service)
    eventually(replica.synced.is_set)
    assert client.endpoints == (pub, router)
    assert client.leader_changes == 1


def test_a_silent_leader_sends_the_worker_back_to_its_seeds(replicas: Replicas) -> None:
    leading = {"name": "a"}
    leader = replicas.manager("a", nodes=("old",), serving=True)
    standby = replicas.manager(
        "b", nodes=("new",), serving=False, leader=lambda: replicas.endpoints(leading["name"])
    )
    client, replica = replicas.worker(replicas.endpoints("b"))
    eventually(lambda: names(replica) == {"old"})
    # The leader dies; the standby takes over (and names itself).
    replicas.stop(leader)
    leading["name"] = "b"
    standby.serve(True)
    eventually(lambda: replica.synced.is_set() and names(replica) == {"new"}, timeout=10)
    assert client.endpoints == replicas.endpoints("b")
    assert client.leader_changes == 1


def test_a_leaving_leader_sends_the_worker_back_to_its_seeds_at_once(replicas: Replicas) -> None:
    named: dict[str, Endpoints | None] = {"leader": replicas.endpoints("a")}
    leader = replicas.manager("a", nodes=("n",), serving=True)
    replicas.manager("b", serving=False, leader=lambda: named["leader"])
    client, replica = replicas.worker(replicas.endpoints("b"))
    eventually(replica.synced.is_set)
    # SIGTERM: the leader pauses its workers, saying it is leaving, and releases the Lease;
    # the standby has not re-read the Lease yet, so it still names the leaving leader.
    leader.pause("manager shutting down", leaving=True)
    # The leader still beats (it is alive), so no silence: the pause alone moves the worker.
    eventually(lambda: client.endpoints == replicas.endpoints("b"))
    # Back to the leaving leader would be 0.25 s later; it is not followed again meanwhile.
    time.sleep(0.5)
    assert client.endpoints == replicas.endpoints("b")
    assert client.leader_changes == 1
    assert not replica.synced.is_set()
    named["leader"] = None


def test_a_refusal_naming_no_leader_sends_the_worker_back_to_its_seeds(
    replicas: Replicas,
) -> None:
    # The seed names "x" as the leader, but x no longer leads and knows no one who does.
    replicas.manager("x", nodes=("stale",), serving=False)
    seed = replicas.manager(
        "b", nodes=("new",), serving=False, leader=lambda: replicas.endpoints("x")
    )
    client, replica = replicas.worker(replicas.endpoints("b"))
    eventually(lambda: client.leader_changes >= 1 and client.endpoints == replicas.endpoints("b"))
    seed.serve(True)
    eventually(lambda: replica.synced.is_set() and names(replica) == {"new"}, timeout=10)


def test_two_managers_naming_each_other_make_no_hot_loop(replicas: Replicas) -> None:
    replicas.manager("a", serving=False, leader=lambda: replicas.endpoints("b"))
    replicas.manager("b", serving=False, leader=lambda: replicas.endpoints("a"))
    client, replica = replicas.worker(replicas.endpoints("a"))
    eventually(lambda: client.leader_changes >= 1)
    time.sleep(3.0)  # the bound below is on what happens in this window, not a wait for it
    # Moves back off 0.25 s, 0.5 s, 1 s, 2 s: about 3 to b in 3 s; a hot loop makes hundreds.
    assert 1 <= client.leader_changes <= 5
    assert not replica.synced.is_set()


def test_a_worker_with_no_topics_follows_the_leader_too(replicas: Replicas) -> None:
    leader = replicas.manager("a", serving=True)
    replicas.manager("b", serving=False, leader=lambda: replicas.endpoints("a"))
    client, _ = replicas.worker(replicas.endpoints("b"), topics=())
    # Its heartbeats reach the leader, whose /healthz tracks each worker by name.
    eventually(lambda: "node" in leader.workers())
    assert client.endpoints == replicas.endpoints("a")


def test_the_new_fields_are_optional_both_ways() -> None:
    """Protocol 2 still: a hello from a worker that predates `endpoints` decodes, and a
    worker that predates `leader` reads a refusal that carries it."""
    old_hello = msgspec.msgpack.encode(
        {"msg": "hello", "session": "s", "worker": "node", "topics": ["node"], "protocol": 2}
    )
    hello = decode(old_hello)
    assert isinstance(hello, Hello)
    assert hello.endpoints == ()

    class OldRefused(msgspec.Struct, frozen=True, tag_field="msg", tag="refused"):
        session: str
        reason: str
        fatal: bool = False

    new = encode_message(
        Refused(session=SessionId("s"), reason="r", leader=("tcp://a:1", "tcp://a:2"))
    )
    assert msgspec.msgpack.decode(new, type=OldRefused) == OldRefused(session="s", reason="r")
