"""The manager's side of the bus: PUB for deltas and heartbeats, ROUTER for everything else.

ZeroMQ sockets belong to one thread, so one thread (`BusServer.run`) owns both, and every
other thread (informers, writer, elector) hands it frames through an inproc PUSH socket of
its own. Publishing therefore never waits for a worker: PUB drops frames for a subscriber
that is past its high-water mark, and that worker sees the gap in sequence numbers and
asks for a new snapshot (docs/architecture.md#bus-clone). A malformed frame is counted and dropped.

The server answers a `Hello` only while this manager leads and its cache has synced;
otherwise it says why (`Refused`) and the worker asks again. A protocol mismatch is
refused for good: the worker exits with a clear error.

With an advertised address (split mode, manager/BUS.md) a refusal also names where the
leader's bus is, and the leader sends a worker that dialled any other address (a Service
over every replica) to its own advertised one: only there are the worker's SUB and DEALER
sure to reach the same manager.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import zmq
import zmq.auth

from pyccm.exposition import REPORT_MAX_AGE
from pyccm.flags.addresses import ServerCurve, require_curve
from pyccm.manager import metrics
from pyccm.manager.store import Cache, Channel
from pyccm.protocol.bus_settings import HEARTBEAT_INTERVAL, LINGER, PUB_SEND_HWM, secure_server
from pyccm.protocol.drops import DropLog
from pyccm.protocol.mailbox import Mailbox
from pyccm.protocol.messages import (
    PROTOCOL_VERSION,
    Ack,
    ActionFailure,
    Delta,
    FailureKind,
    Heartbeat,
    Hello,
    Identity,
    Message,
    Pause,
    Refused,
    Result,
    Resume,
    Seq,
    SessionId,
    Snapshot,
    Topic,
    WhoIs,
    WorkerMetrics,
    decode,
    encode,
)
from pyccm.protocol.views import Node, Service

if TYPE_CHECKING:
    # Imported when CURVE is on: zmq's authenticator thread loads asyncio, which a manager
    # on ipc:// need not carry (docs/architecture.md#lean-imports).
    from zmq.auth.thread import ThreadAuthenticator

log = logging.getLogger(__name__)

WorkerIdentity = bytes
ResultHandler = Callable[[WorkerIdentity, Result], None]
# Where the leader's bus is as far as this manager knows ((PUB, ROUTER) or None).
LeaderBus = Callable[[], tuple[str, str] | None]

_PUB = b"pub"
_ROUTER = b"router"


@dataclass(frozen=True)
class BusSettings:
    # ipc:// under a 0700 runtime dir by default: one pod, one supervisord
    # (docs/architecture.md#bus-addresses).
    pub_address: str
    router_address: str
    # CURVE keys (flags/addresses.py): required for any address that is not ipc://, so a
    # tcp port is never open to whoever can reach it; optional on ipc://.
    curve: ServerCurve | None = None
    # This replica's own (PUB, ROUTER) addresses as workers reach them (--bus-advertise-
    # address); None: workers are served wherever they dialled, as with one replica.
    advertise: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        require_curve((self.pub_address, self.router_address), self.curve)
        if self.advertise is not None:
            require_curve(self.advertise, self.curve)


class AuthorizedKeys:
    """The worker public keys the manager accepts: `*.key` files in one directory.

    Asked once per CURVE handshake (ZAP), and re-read when the files change, so adding or
    revoking a worker needs no manager restart (a restart would hand leadership away).
    Revoking a key refuses new handshakes; a connection already made stays up until it drops.
    """

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._stamp: tuple[tuple[str, int], ...] | None = None
        self._keys: set[bytes] = set()

    def callback(self, domain: str, key: bytes) -> bool:
        self._refresh()
        return key in self._keys

    def count(self) -> int:
        self._refresh()
        return len(self._keys)

    def _refresh(self) -> None:
        try:
            stamp = tuple(
                sorted((p.name, p.stat().st_mtime_ns) for p in self._directory.glob("*.key"))
            )
            if stamp == self._stamp:
                return
            keys = set(zmq.auth.load_certificates(self._directory))
        except (OSError, ValueError) as error:
            # Keep the last good set: a half-written file must not lock every worker out.
            log.warning("bus: cannot read worker keys in %s: %s", self._directory, error)
            return
        self._stamp, self._keys = stamp, keys


@dataclass
class WorkerState:
    """What the manager knows of one connected worker (for /healthz, /readyz, metrics)."""

    name: str
    session: SessionId
    last_seen: float
    # Per channel (protocol.projections.channel).
    seqs: dict[str, int] = field(default_factory=dict)
    # Its last metrics report (split mode) and when it came; "" when none.
    exposition: str = ""
    reported: float = 0.0


class BusServer:
    def __init__(
        self,
        *,
        settings: BusSettings,
        session: SessionId,
        cache: Cache,
        on_result: ResultHandler,
        leader_bus: LeaderBus = lambda: None,
        cluster_id: Callable[[], str] = lambda: "",
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
    ) -> None:
        self._settings = settings
        self._cluster_id = cluster_id
        self._session = session
        self._cache = cache
        self._on_result = on_result
        self._leader_bus = leader_bus
        # The ZAP authenticator binds a fixed inproc address, one per context: a CURVE
        # server gets a context of its own so two of them in one process do not clash.
        self._own_context = context is None and settings.curve is not None
        self._context = context or (zmq.Context() if self._own_context else zmq.Context.instance())
        # Frames for the bus thread to send; a delta carries its (channel, seq) so the
        # heartbeat can announce only what was really published: announcing the cache's
        # sequence would race deltas still in this mailbox and fake a gap.
        self._outbox: Mailbox[tuple[list[bytes], str | None, Seq]] = Mailbox()
        self._published: dict[str, Seq] = {}
        self._serving = threading.Event()
        self._paused = False
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self._workers: dict[str, WorkerState] = {}
        self._drops = DropLog(side="manager")
        self._thread = threading.Thread(target=self.run, name="bus", daemon=True)

    # --- called from any thread -----------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(10)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def publish(self, channel: str, delta: Delta) -> None:
        if not self._serving.is_set():
            return
        metrics.BUS_SEQUENCE.labels(channel=channel).set(delta.seq)
        self._outbox.put(([_PUB, channel.encode(), encode(delta)], channel, delta.seq))

    def send(self, identity: WorkerIdentity, message: Message) -> None:
        self._push([_ROUTER, identity, encode(message)])

    def serve(self, serving: bool) -> None:
        """Start or stop answering workers (leadership gained or lost)."""
        if serving:
            self._serving.set()
        else:
            self._serving.clear()

    def pause(self, reason: str, *, leaving: bool = False) -> None:
        self._paused = True
        self._push(
            [
                _PUB,
                Topic.CONTROL.value.encode(),
                encode(Pause(session=self._session, reason=reason, leaving=leaving)),
            ]
        )

    def resume(self) -> None:
        self._paused = False
        self._push([_PUB, Topic.CONTROL.value.encode(), encode(Resume(session=self._session))])

    def workers(self) -> dict[str, WorkerState]:
        with self._lock:
            return dict(self._workers)

    def worker_metrics(self) -> dict[str, str]:
        """The recent metrics report of each worker that sends them (split mode)."""
        oldest = time.monotonic() - REPORT_MAX_AGE
        with self._lock:
            return {
                name: state.exposition
                for name, state in self._workers.items()
                if state.exposition and state.reported >= oldest
            }

    # --- the bus thread --------------------------------------------------------------

    def run(self) -> None:
        # The authenticator must answer before the first bind: a CURVE server with no ZAP
        # handler accepts any client key.
        auth = self._authenticator()
        pub = self._context.socket(zmq.PUB)
        pub.setsockopt(zmq.SNDHWM, PUB_SEND_HWM)
        secure_server(pub, self._settings.curve)
        pub.bind(self._settings.pub_address)
        router = self._context.socket(zmq.ROUTER)
        secure_server(router, self._settings.curve)
        router.bind(self._settings.router_address)
        if self._settings.advertise is not None:
            log.info("bus: advertised to workers as %s and %s", *self._settings.advertise)
        poller = zmq.Poller()
        poller.register(router, zmq.POLLIN)
        poller.register(self._outbox.fileno(), zmq.POLLIN)
        self._ready.set()
        next_beat = time.monotonic()
        try:
            while not self._stop.is_set():
                timeout_ms = max(0, int((next_beat - time.monotonic()) * 1000))
                events = dict(poller.poll(min(timeout_ms, 200)))
                if self._outbox.fileno() in events:
                    self._forward(pub, router)
                if router in events:
                    self._receive(router)
                if time.monotonic() >= next_beat:
                    self._heartbeat(pub)
                    next_beat = time.monotonic() + HEARTBEAT_INTERVAL
        finally:
            pub.close(linger=LINGER)
            router.close(linger=LINGER)
            self._outbox.close()
            if auth is not None:
                auth.stop()
            if self._own_context:
                self._context.term()

    def _authenticator(self) -> ThreadAuthenticator | None:
        curve = self._settings.curve
        if curve is None:
            return None
        from zmq.auth.thread import ThreadAuthenticator

        auth = ThreadAuthenticator(self._context)
        auth.start()
        keys = AuthorizedKeys(curve.authorized)
        # Every ZAP domain ("*"): the bus has one set of workers.
        auth.configure_curve_callback(domain="*", credentials_provider=keys)
        log.info(
            "bus: CURVE on, server key %s, %d authorized worker key(s) in %s",
            curve.public_key.decode(),
            keys.count(),
            curve.authorized,
        )
        return auth

    def _forward(self, pub: zmq.Socket[bytes], router: zmq.Socket[bytes]) -> None:
        for (kind, address, payload), channel, seq in self._outbox.drain():
            target = pub if kind == _PUB else router
            target.send_multipart([address, payload])
            if channel is not None:
                self._published[channel] = seq

    def _receive(self, router: zmq.Socket[bytes]) -> None:
        while True:
            try:
                frames = router.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if len(frames) != 2:
                self._drops.dropped(ValueError(f"{len(frames)} frames instead of 2"))
                continue
            identity, payload = frames
            try:
                message = decode(payload)
            except (msgspec.DecodeError, msgspec.ValidationError) as error:
                self._drops.dropped(error)
                continue
            self._dispatch(identity, message)

    def _dispatch(self, identity: WorkerIdentity, message: Message) -> None:
        match message:
            case Hello():
                self._hello(identity, message)
            case WhoIs():
                self.send(identity, Identity(session=self._session, cluster_id=self._cluster_id()))
            case Heartbeat(worker=name, seqs=seqs, session=session):
                self._seen(name, session, seqs)
            case WorkerMetrics(worker=name, session=session, exposition=exposition):
                self._seen(name, session, None)
                with self._lock:
                    if (state := self._workers.get(name)) is not None:
                        state.exposition, state.reported = exposition, time.monotonic()
            case Result():
                self._seen(message.worker, message.session, None)
                if self._serving.is_set():
                    self._on_result(identity, message)
                else:
                    failure = ActionFailure(
                        index=0, kind=FailureKind.NOT_LEADER, message="not leading"
                    )
                    self.send(
                        identity, Ack(session=self._session, id=message.id, failures=(failure,))
                    )
            case _:
                self._drops.dropped(
                    ValueError(f"unexpected {type(message).__name__} from a worker")
                )

    def _hello(self, identity: WorkerIdentity, hello: Hello) -> None:
        self._seen(hello.worker, hello.session, None)
        if hello.protocol != PROTOCOL_VERSION:
            reason = f"protocol {hello.protocol} is not the manager's protocol {PROTOCOL_VERSION}"
            log.error("refused worker %s: %s", hello.worker, reason)
            self.send(identity, Refused(session=self._session, reason=reason, fatal=True))
            return
        if not self._serving.is_set() or not self._cache.synced():
            reason = "not leading yet" if not self._serving.is_set() else "cache not synced yet"
            leader = self._leader_bus() or ()
            self.send(identity, Refused(session=self._session, reason=reason, leader=leader))
            return
        advertise = self._settings.advertise
        if advertise is not None and hello.endpoints and hello.endpoints != advertise:
            # Dialled through a Service (or another replica's address): its SUB may sit on
            # another manager. It moves before any snapshot, which it would throw away.
            reason = f"the leader's bus is at {advertise[1]}"
            self.send(identity, Refused(session=self._session, reason=reason, leader=advertise))
            return
        channels = [self._cache.channel(hello.view, topic) for topic in hello.topics]
        for topic, chan in zip(hello.topics, channels, strict=True):
            if chan is None:
                # A worker built for another manager version: it would never sync.
                reason = f"no view {hello.view!r} of {topic.value} on this manager"
                log.error("refused worker %s: %s", hello.worker, reason)
                self.send(identity, Refused(session=self._session, reason=reason, fatal=True))
                return
        for chan in channels:
            assert chan is not None
            self.send(identity, self._snapshot(chan))

    def _snapshot(self, chan: Channel) -> Snapshot:
        seq, objects = chan.snapshot()
        return Snapshot(
            session=self._session,
            topic=chan.topic,
            seq=seq,
            nodes=tuple(obj for obj in objects if isinstance(obj, Node)),
            services=tuple(obj for obj in objects if isinstance(obj, Service)),
            paused=self._paused,
        )

    def _seen(self, name: str, session: SessionId, seqs: Mapping[str, int] | None) -> None:
        with self._lock:
            state = self._workers.get(name)
            if state is None or state.session != session:
                state = WorkerState(name=name, session=session, last_seen=time.monotonic())
                self._workers[name] = state
            state.last_seen = time.monotonic()
            if seqs is not None:
                state.seqs = dict(seqs)
        metrics.BUS_WORKER_LAST_SEEN.labels(worker=name).set(time.time())
        if seqs is not None:
            for name_of_channel, seq in seqs.items():
                chan = self._cache.channels.get(name_of_channel)
                if chan is not None:
                    lag = chan.seq - seq
                    metrics.BUS_WORKER_LAG.labels(worker=name, channel=name_of_channel).set(
                        max(0, lag)
                    )

    def _heartbeat(self, pub: zmq.Socket[bytes]) -> None:
        beat = Heartbeat(
            session=self._session,
            seqs=dict(self._published),
            paused=self._paused or not self._serving.is_set(),
        )
        pub.send_multipart([Topic.CONTROL.value.encode(), encode(beat)])

    def _push(self, frames: list[bytes]) -> None:
        self._outbox.put((frames, None, Seq(0)))
