"""A manager-side bus server and a worker-side client wired over ipc in a temp dir."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from manager.bus import BusServer, BusSettings, WorkerIdentity
from manager.store import Cache
from protocol.messages import Ack, Delta, Result, SessionId, Topic
from protocol.views import Node, NodeSpec, OwnerMeta
from workers.runtime.bus import BusClient, BusClientSettings
from workers.runtime.replica import Replica


def node(name: str, rv: int, provider_id: str = "") -> Node:
    return Node(
        metadata=OwnerMeta(name=name, uid=f"uid-{name}", resource_version=str(rv)),
        spec=NodeSpec(provider_id=provider_id),
    )


def eventually(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait for a condition the system under test must reach; fail with a clear message."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached within {timeout}s")
        time.sleep(0.01)


@dataclass
class Manager:
    server: BusServer
    cache: Cache
    session: SessionId


class Bus:
    """Starts managers and workers on one pair of addresses."""

    def __init__(self, tmp: Path) -> None:
        self.settings = BusSettings(
            pub_address=f"ipc://{tmp}/pub", router_address=f"ipc://{tmp}/router"
        )
        self._started: list[BusServer | BusClient] = []

    def manager(self, *, serving: bool = True) -> Manager:
        session = SessionId(uuid.uuid4().hex)
        holder: list[BusServer] = []

        def ack(identity: WorkerIdentity, result: Result) -> None:
            holder[0].send(identity, Ack(session=session, id=result.id))

        def publish(delta: Delta) -> None:
            holder[0].publish(delta)

        cache = Cache(session=session, publish=publish)
        server = BusServer(settings=self.settings, session=session, cache=cache, on_result=ack)
        holder.append(server)
        cache.nodes.synced.set()
        cache.services.synced.set()
        server.serve(serving)
        server.start()
        self._started.append(server)
        return Manager(server=server, cache=cache, session=session)

    def worker(self, name: str = "node") -> tuple[BusClient, Replica]:
        replica = Replica()
        client = BusClient(
            settings=BusClientSettings(
                pub_address=self.settings.pub_address, router_address=self.settings.router_address
            ),
            worker=name,
            session=SessionId(uuid.uuid4().hex),
            topics=(Topic.NODE,),
            replica=replica,
        )
        client.start()
        self._started.append(client)
        return client, replica

    def stop(self, part: BusServer | BusClient) -> None:
        part.stop()
        self._started.remove(part)

    def close(self) -> None:
        for part in self._started:
            part.stop()


@pytest.fixture
def bus(tmp_path: Path) -> Iterator[Bus]:
    wiring = Bus(tmp_path)
    yield wiring
    wiring.close()
