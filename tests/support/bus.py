"""A manager-side bus server and worker-side clients wired over ipc (or tcp), and CURVE key
directories laid out as manager/BUS.md says (tests/bus)."""

from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

import zmq.auth

from pyccm.flags.addresses import ClientCurve
from pyccm.manager.bus import BusServer, BusSettings, WorkerIdentity
from pyccm.manager.store import Cache
from pyccm.protocol.messages import Ack, Delta, Result, SessionId, Topic
from pyccm.workers.runtime.bus import BusClient, BusClientSettings
from pyccm.workers.runtime.replica import Replica


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
