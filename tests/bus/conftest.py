"""A manager-side bus server and worker-side clients wired over ipc (or tcp) in a temp dir."""

from __future__ import annotations

import shutil
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import zmq.auth

from pyccm.manager.bus import BusServer, BusSettings, WorkerIdentity
from pyccm.manager.store import Cache
from pyccm.protocol.addresses import ClientCurve, load_server_curve
from pyccm.protocol.messages import Ack, Delta, Result, SessionId, Topic
from pyccm.protocol.views import Node, NodeSpec, OwnerMeta
from pyccm.workers.runtime.bus import BusClient, BusClientSettings
from pyccm.workers.runtime.replica import Replica


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

    def __init__(self, settings: BusSettings) -> None:
        self.settings = settings
        self._started: list[BusServer | BusClient] = []

    def manager(self, *, serving: bool = True) -> Manager:
        session = SessionId(uuid.uuid4().hex)
        holder: list[BusServer] = []

        def ack(identity: WorkerIdentity, result: Result) -> None:
            holder[0].send(identity, Ack(session=session, id=result.id))

        def publish(channel: str, delta: Delta) -> None:
            holder[0].publish(channel, delta)

        cache = Cache(session=session, publish=publish)
        server = BusServer(settings=self.settings, session=session, cache=cache, on_result=ack)
        holder.append(server)
        cache.nodes.synced.set()
        cache.services.synced.set()
        server.serve(serving)
        server.start()
        self._started.append(server)
        return Manager(server=server, cache=cache, session=session)

    def worker(
        self,
        name: str = "node",
        *,
        curve: ClientCurve | None = None,
        view: str = "cloud-node",
        topics: tuple[Topic, ...] = (Topic.NODE,),
    ) -> tuple[BusClient, Replica]:
        replica = Replica()
        client = BusClient(
            settings=BusClientSettings(
                pub_address=self.settings.pub_address,
                router_address=self.settings.router_address,
                curve=curve,
            ),
            worker=name,
            session=SessionId(uuid.uuid4().hex),
            view=view,
            topics=topics,
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
    wiring = Bus(
        BusSettings(pub_address=f"ipc://{tmp_path}/pub", router_address=f"ipc://{tmp_path}/router")
    )
    yield wiring
    wiring.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass(frozen=True)
class KeyDirs:
    """--bus-curve-dir directories laid out as manager/BUS.md says, one per party."""

    manager: Path
    worker: Path
    # A worker with a well-formed key pair the manager was never told about.
    stranger: Path
    # Where the stranger's public key would go to be accepted.
    stranger_public: Path


def make_key_dirs(tmp: Path) -> KeyDirs:
    certs = tmp / "certs"
    certs.mkdir()
    for name in ("server", "client", "stranger"):
        zmq.auth.create_certificates(certs, name)
    manager = tmp / "manager-keys"
    (manager / "authorized").mkdir(parents=True)
    shutil.copy(certs / "server.key_secret", manager / "server.key_secret")
    shutil.copy(certs / "client.key", manager / "authorized" / "client.key")
    worker, stranger = tmp / "worker-keys", tmp / "stranger-keys"
    for directory, secret in ((worker, "client"), (stranger, "stranger")):
        directory.mkdir()
        shutil.copy(certs / "server.key", directory / "server.key")
        shutil.copy(certs / f"{secret}.key_secret", directory / "client.key_secret")
    return KeyDirs(
        manager=manager,
        worker=worker,
        stranger=stranger,
        stranger_public=certs / "stranger.key",
    )


@pytest.fixture
def keys(tmp_path: Path) -> KeyDirs:
    return make_key_dirs(tmp_path)


@pytest.fixture
def tcp_bus(keys: KeyDirs) -> Iterator[Bus]:
    """A bus on 127.0.0.1 whose manager accepts only the `keys.worker` key."""
    wiring = Bus(
        BusSettings(
            pub_address=f"tcp://127.0.0.1:{free_port()}",
            router_address=f"tcp://127.0.0.1:{free_port()}",
            curve=load_server_curve(keys.manager),
        )
    )
    yield wiring
    wiring.close()
