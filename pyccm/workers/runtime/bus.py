"""A worker's side of the bus: SUB for deltas, DEALER for hello/snapshots/results/acks.

The Clone pattern, client half (DESIGN §2): subscribe first, then ask for a snapshot, buffer
the deltas that arrive meanwhile, and apply those newer than the snapshot. From then on
every delta must carry the next sequence number of its topic and the manager's session;
a gap, a new session, a heartbeat announcing deltas we never saw, or 3 s of silence all
mean the replica can no longer be trusted, so the client asks for a new snapshot (the
replica emits only the difference, so nothing is lost or replayed twice).

Like the server, one thread owns both sockets; sync threads hand it results through an
inproc socket and wait on a Future for the manager's `Ack`. Results in flight when the
manager goes away are failed as `UNAVAILABLE`, so their syncs retry against the next
manager instead of waiting forever.

Following the leader (split mode, manager/BUS.md): the addresses a worker is started with
are *seeds*, e.g. a Service over every manager replica. A manager that refuses the hello
may name the leader's own addresses (`Refused.leader`); the worker then closes both
sockets and opens both at those addresses, so its SUB and DEALER always reach the same
manager. When that manager goes silent, or refuses without naming another, the worker
goes back to its seeds and starts over. Moves in a row without getting synced are spaced
out (0.25 s doubling to 2 s), so two replicas that name each other cannot make a hot loop.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

import msgspec
import zmq
from prometheus_client import CollectorRegistry, Counter
from zmq.utils.monitor import recv_monitor_message

from pyccm.protocol.addresses import ClientCurve, require_curve
from pyccm.protocol.drops import DropLog
from pyccm.protocol.exposition import REPORT_INTERVAL, local_registry, render
from pyccm.protocol.mailbox import Mailbox
from pyccm.protocol.messages import (
    Ack,
    Action,
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
    ResultId,
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
from pyccm.protocol.projections import channel
from pyccm.workers.runtime.replica import Replica
from pyccm.workers.runtime.waiting import ManagerWait, WaitSettings

log = logging.getLogger(__name__)

DELTAS_RECEIVED = Counter(
    "pyccm_bus_deltas_received_total",
    "Deltas a worker applied to its replica (each one may wake its controller), by topic.",
    ["worker", "topic"],
)
LEADER_CHANGES = Counter(
    "pyccm_bus_leader_changes_total",
    "Times a worker moved its bus sockets to the addresses a manager named as the leader's "
    "(split mode: after a start on the seed addresses, or a manager failover).",
    ["worker"],
)


_HANDSHAKE_FAILURES: dict[int, str] = {
    zmq.EVENT_HANDSHAKE_FAILED_AUTH: "key not authorized",
    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL: "protocol error",
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL: "no detail; often a wrong server key",
}


# A failure "with no detail" is how a wrong server key looks, but also a manager (or a
# Service's backend) going away mid-handshake, which a failover does once: only a run of
# this many in a row is reported (libzmq retries a wrong key every ~100 ms).
_NO_DETAIL_RUN = 3


@dataclass(frozen=True)
class BusClientSettings:
    pub_address: str
    router_address: str
    # The manager beats every second; three missed beats mean it is gone (DESIGN §2).
    silence_timeout: float = 3.0
    heartbeat_interval: float = 1.0
    # How long to wait for snapshots before asking again (a refused or lost hello).
    hello_retry: float = 1.0
    # A hello that could not even be queued (no connection yet: a CURVE handshake takes a
    # few ms longer than the first send) is retried this soon instead of after hello_retry.
    hello_unsent_retry: float = 0.02
    # CURVE keys (protocol/addresses.py): required for any address that is not ipc://,
    # because the manager only talks CURVE there; optional on ipc://.
    curve: ClientCurve | None = None
    # The first move to another manager's addresses is at once; each further one before
    # getting synced waits twice as long as the last, from this up to move_backoff_max
    # (well under the 3 s silence timeout that sends a worker back to its seeds anyway).
    move_backoff: float = 0.25
    move_backoff_max: float = 2.0
    # When a worker that waits for its manager says so (runtime/waiting.py).
    wait: WaitSettings = field(default_factory=WaitSettings)

    def __post_init__(self) -> None:
        require_curve((self.pub_address, self.router_address), self.curve)


class FatalBusError(RuntimeError):
    """The manager refused this worker for good (protocol mismatch)."""


Endpoints = tuple[str, str]


@dataclass
class _Link:
    """The SUB and DEALER open to one manager: always both to the same (PUB, ROUTER)."""

    endpoints: Endpoints
    sub: zmq.Socket[bytes]
    dealer: zmq.Socket[bytes]
    # CURVE handshake events of the DEALER (None without CURVE).
    monitor: zmq.Socket[bytes] | None
    poller: zmq.Poller = field(default_factory=zmq.Poller)

    def close(self) -> None:
        # linger 0: nothing queued for or from this manager survives a move.
        if self.monitor is not None:
            self.dealer.disable_monitor()
            self.monitor.close(linger=0)
        self.sub.close(linger=0)
        self.dealer.close(linger=0)


class BusClient:
    def __init__(
        self,
        *,
        settings: BusClientSettings,
        worker: str,
        session: SessionId,
        view: str,
        topics: tuple[Topic, ...],
        replica: Replica,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
    ) -> None:
        self._settings = settings
        self._worker = worker
        self._session = session
        # This controller's projection (protocol.projections): its channels, one per topic.
        self._view = view
        self._topics = topics
        self._channels = {topic: channel(view, topic) for topic in topics}
        self._received = {
            topic: DELTAS_RECEIVED.labels(worker=worker, topic=topic.value) for topic in topics
        }
        self._replica = replica
        self._context = context or zmq.Context.instance()
        self._ids = itertools.count(1)
        self._pending: dict[ResultId, Future[Ack]] = {}
        self._pending_lock = threading.Lock()
        self._outbox: Mailbox[Result] = Mailbox()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self.paused = threading.Event()
        self.fatal: FatalBusError | None = None
        self.resnapshots = 0
        # CURVE handshakes the manager turned down (an unknown key or the wrong server key).
        self.handshake_failures = 0
        self._refused_logged = False
        self._failures_in_a_row = 0
        self._drops = DropLog(side="worker")
        # What the worker is waiting for, said every so often until the manager answers;
        # `_refusal` is why it did not (its last refusal), "" for no answer at all.
        self._wait = ManagerWait(worker=worker, settings=settings.wait)
        self._refusal = ""
        # Sync state, owned by the bus thread.
        self._manager: SessionId | None = None
        self._seqs: dict[Topic, Seq] = {}
        self._awaiting: set[Topic] = set()
        self._buffer: list[Delta] = []
        self._last_heard = time.monotonic()
        self._hello_sent = 0.0
        self._hello_queued = False
        # Where the worker was started to dial, where it is connected now, and a move it
        # decided on (done by the loop, at `_move_due`: never while a socket is being read).
        self._seeds: Endpoints = (settings.pub_address, settings.router_address)
        self._link: _Link | None = None
        self._move_to: Endpoints | None = None
        self._move_due = 0.0
        self._moved_at = -float("inf")
        self._unsynced_moves = 0
        # The manager that last said it was leaving, and when: not followed again for a
        # silence timeout, as a standby may still name it until it re-reads the Lease.
        self._left: tuple[Endpoints, float] | None = None
        self.leader_changes = 0
        self._leader_changes = LEADER_CHANGES.labels(worker=worker)
        self._thread = threading.Thread(target=self._run, name="bus-client", daemon=True)

    # --- any thread -------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(10)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def submit(self, key: str, actions: tuple[Action, ...]) -> Future[Ack]:
        """Send a sync's actions to the manager; the Future resolves with its Ack."""
        result_id = ResultId(next(self._ids))
        future: Future[Ack] = Future()
        with self._pending_lock:
            self._pending[result_id] = future
        result = Result(
            session=self._session, worker=self._worker, id=result_id, key=key, actions=actions
        )
        self._outbox.put(result)
        return future

    # --- the bus thread ---------------------------------------------------------------

    def _run(self) -> None:
        self._link = self._open(self._seeds)
        self._ready.set()
        next_beat = 0.0
        # On a tcp:// bus the worker is in a pod of its own (split mode), whose metrics nobody
        # scrapes: it sends them to the manager, which serves them with its own; the first
        # report once it has been up a while (its first syncs counted).
        tcp = self._settings.router_address.startswith("tcp://")
        reported = local_registry() if tcp else None
        next_report = time.monotonic() + REPORT_INTERVAL
        try:
            self._resnapshot(reason="start")
            while not self._stop.is_set() and self.fatal is None:
                link = self._link
                events = dict(link.poller.poll(self._poll_ms()))
                if link.sub in events:
                    self._drain(link.sub, multipart=True)
                if link.dealer in events:
                    self._drain(link.dealer, multipart=False)
                if self._outbox.fileno() in events:
                    self._send_results()
                if link.monitor is not None and link.monitor in events:
                    self._on_handshakes(link.monitor)
                now = time.monotonic()
                if self._move_to is not None:
                    if now >= self._move_due:
                        self._move(self._move_to)
                    continue
                if now >= next_beat:
                    self._beat()
                    next_beat = now + self._settings.heartbeat_interval
                if reported is not None and now >= next_report:
                    self._report_metrics(reported)
                    next_report = now + REPORT_INTERVAL
                self._check_liveness(now)
                if self._wait.active:
                    self._say_waiting()
        finally:
            self._fail_pending("bus client stopped")
            self._link.close()

    def _open(self, endpoints: Endpoints) -> _Link:
        pub, router = endpoints
        sub = self._context.socket(zmq.SUB)
        for name in (*self._channels.values(), Topic.CONTROL.value):
            sub.setsockopt(zmq.SUBSCRIBE, name.encode())
        self._secure(sub)
        sub.connect(pub)
        dealer = self._context.socket(zmq.DEALER)
        self._secure(dealer)
        # Queue nothing for a manager that is not there: results fail fast instead.
        dealer.setsockopt(zmq.IMMEDIATE, 1)
        dealer.connect(router)
        link = _Link(
            endpoints=endpoints, sub=sub, dealer=dealer, monitor=self._watch_handshakes(dealer)
        )
        for sock in (sub, dealer):
            link.poller.register(sock, zmq.POLLIN)
        link.poller.register(self._outbox.fileno(), zmq.POLLIN)
        if link.monitor is not None:
            link.poller.register(link.monitor, zmq.POLLIN)
        return link

    @property
    def _dealer(self) -> zmq.Socket[bytes]:
        assert self._link is not None
        return self._link.dealer

    @property
    def endpoints(self) -> Endpoints:
        """The (PUB, ROUTER) addresses the worker is connected to now (bus thread's view)."""
        return self._link.endpoints if self._link is not None else self._seeds

    # --- following the leader ---------------------------------------------------------

    def _plan_move(self, endpoints: Endpoints) -> None:
        if self._move_to is not None:
            return
        delay = 0.0
        if self._unsynced_moves:
            delay = min(
                self._settings.move_backoff_max,
                self._settings.move_backoff * 2 ** (self._unsynced_moves - 1),
            )
        self._move_to = endpoints
        self._move_due = max(time.monotonic(), self._moved_at + delay)

    def _move(self, endpoints: Endpoints) -> None:
        """Close both sockets, open both at `endpoints`, and start over with a hello."""
        assert self._link is not None
        self._move_to = None
        self._fail_pending("the worker is moving to another manager")
        self._link.close()
        self._link = self._open(endpoints)
        self._failures_in_a_row = 0
        self._moved_at = self._last_heard = time.monotonic()
        self._unsynced_moves += 1
        if endpoints == self._seeds:
            log.info("back to the seed addresses %s, %s", *endpoints)
        else:
            log.info("following the leader at %s, %s", *endpoints)
            self.leader_changes += 1
            self._leader_changes.inc()
        self._resnapshot(reason="moved")

    def _on_refused(self, refused: Refused) -> None:
        if refused.fatal:
            log.error("the manager refused this worker: %s", refused.reason)
            self.fatal = FatalBusError(refused.reason)
            return
        here = self.endpoints
        leader = tuple(refused.leader)
        if self._just_left(leader):
            # A standby that has not re-read the Lease since the leader released it still
            # names the leader that just said it is leaving: that is no leader.
            leader = ()
        if len(leader) == 2 and leader != here:
            self._plan_move((leader[0], leader[1]))
        elif not leader and here != self._seeds:
            # The manager we followed no longer leads and knows no one who does.
            log.info("the manager at %s refused (%s)", here[1], refused.reason)
            self._plan_move(self._seeds)
        else:
            # Asked again every hello_retry: the waiting line says it every so often.
            log.debug("manager not serving yet (%s); asking again", refused.reason)
        self._refusal = f"it refused ({refused.reason})"

    def _just_left(self, leader: tuple[str, ...]) -> bool:
        if self._left is None:
            return False
        endpoints, when = self._left
        return leader == endpoints and time.monotonic() - when < self._settings.silence_timeout

    def _watch_handshakes(self, dealer: zmq.Socket[bytes]) -> zmq.Socket[bytes] | None:
        """With CURVE, a refused key would otherwise look like a manager that never answers."""
        if self._settings.curve is None:
            return None
        return dealer.get_monitor_socket(
            zmq.EVENT_HANDSHAKE_SUCCEEDED
            | zmq.EVENT_HANDSHAKE_FAILED_AUTH
            | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
            | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
        )

    def _on_handshakes(self, monitor: zmq.Socket[bytes]) -> None:
        while True:
            try:
                event = recv_monitor_message(monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            if event["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._refused_logged = False
                self._failures_in_a_row = 0
                continue
            self.handshake_failures += 1
            self._failures_in_a_row += 1
            if (
                event["event"] == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
                and self._failures_in_a_row < _NO_DETAIL_RUN
            ):
                continue
            # libzmq retries on its own; one line per run of failures, not one per retry.
            self._refusal = "it refused the CURVE handshake"
            if not self._refused_logged:
                self._refused_logged = True
                log.error(
                    "the manager at %s refused the CURVE handshake (%s, code %d): is this "
                    "worker's public key in its authorized/ directory, and is server.key the "
                    "manager's?",
                    self.endpoints[1],
                    _HANDSHAKE_FAILURES.get(event["event"], "failed"),
                    event["value"],
                )

    def _secure(self, sock: zmq.Socket[bytes]) -> None:
        _secure(sock, self._settings.curve)

    def _drain(self, sock: zmq.Socket[bytes], *, multipart: bool) -> None:
        while True:
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            payload = frames[-1]
            if len(frames) != (2 if multipart else 1):
                self._drops.dropped(ValueError(f"{len(frames)} frames"))
                continue
            try:
                message = decode(payload)
            except (msgspec.DecodeError, msgspec.ValidationError) as error:
                self._drops.dropped(error)
                continue
            if self._move_to is not None:
                continue  # leaving this manager: nothing it says matters any more
            self._last_heard = time.monotonic()
            self._handle(message)

    def _handle(self, message: Message) -> None:
        match message:
            case Delta():
                self._on_delta(message)
            case Snapshot():
                self._on_snapshot(message)
            case Heartbeat():
                self._on_heartbeat(message)
            case Ack():
                self._on_ack(message)
            case Pause():
                self.paused.set()
                if message.leaving and self.endpoints != self._seeds:
                    log.info("the manager at %s is leaving", self.endpoints[1])
                    self._left = (self.endpoints, time.monotonic())
                    self._plan_move(self._seeds)
            case Resume():
                self.paused.clear()
            case Refused():
                self._on_refused(message)
            case _:
                self._drops.dropped(
                    ValueError(f"unexpected {type(message).__name__} from the manager")
                )

    def _on_delta(self, delta: Delta) -> None:
        if delta.topic not in self._channels:
            self._drops.dropped(ValueError(f"a delta of {delta.topic.value}, not subscribed"))
            return
        if self._awaiting:
            self._buffer.append(delta)
            return
        if delta.session != self._manager:
            self._resnapshot(reason="manager restarted")
            return
        expected = self._seqs.get(delta.topic, Seq(0)) + 1
        if delta.seq < expected:
            return
        if delta.seq > expected:
            self._resnapshot(reason=f"gap on {delta.topic.value}: {expected} -> {delta.seq}")
            return
        self._apply(delta)

    def _apply(self, delta: Delta) -> None:
        self._seqs[delta.topic] = delta.seq
        self._received[delta.topic].inc()
        self._replica.apply(delta.topic, delta.key, delta.node or delta.service)

    def _on_snapshot(self, snapshot: Snapshot) -> None:
        if snapshot.topic not in self._awaiting:
            return
        if self._manager is not None and snapshot.session != self._manager:
            # Snapshots from two manager sessions must not be mixed.
            self._awaiting = set(self._topics)
        self._manager = snapshot.session
        self._awaiting.discard(snapshot.topic)
        self._seqs[snapshot.topic] = snapshot.seq
        self._replica.replace(snapshot.topic, snapshot.nodes or snapshot.services)
        if snapshot.paused:
            self.paused.set()
        if not self._awaiting:
            self._replay_buffer()

    def _replay_buffer(self) -> None:
        buffered, self._buffer = self._buffer, []
        for delta in buffered:
            if delta.session == self._manager:
                self._on_delta(delta)
        if not self._awaiting:
            self._unsynced_moves = 0
            self._replica.synced.set()
            self._wait.end()
            log.info("replica synced from the manager at %s", self.endpoints[1])

    def _on_heartbeat(self, beat: Heartbeat) -> None:
        if beat.paused:
            self.paused.set()
        else:
            self.paused.clear()
        if self._awaiting:
            return
        if not self._topics:
            # A worker with no topics (a disabled controller) has nothing to snapshot; it
            # only follows the manager for pause/resume and sends its own heartbeats.
            self._manager = beat.session
            self._unsynced_moves = 0
            self._wait.end()
            return
        if beat.session != self._manager:
            self._resnapshot(reason="manager restarted")
            return
        for topic, name in self._channels.items():
            if beat.seqs.get(name, Seq(0)) > self._seqs.get(topic, Seq(0)):
                self._resnapshot(reason=f"missed deltas on {topic.value}")
                return

    def _on_ack(self, ack: Ack) -> None:
        with self._pending_lock:
            future = self._pending.pop(ack.id, None)
        if future is not None:
            future.set_result(ack)

    def _check_liveness(self, now: float) -> None:
        if now - self._last_heard > self._settings.silence_timeout:
            self._fail_pending("the manager went silent")
            self._last_heard = now
            if self.endpoints != self._seeds:
                log.info("the manager at %s went silent", self.endpoints[1])
                self._plan_move(self._seeds)
            else:
                self._resnapshot(reason="manager silent")
        elif self._hello_due() and now - self._hello_sent > self._hello_wait():
            self._send_hello()

    def _hello_due(self) -> bool:
        # A worker with no topics gets no snapshot to end its waiting, so it keeps saying
        # hello: that is how a standby, once it knows the leader, can send it there.
        return bool(self._awaiting) or not self._topics

    def _resnapshot(self, *, reason: str) -> None:
        if reason != "start":
            # Again while waiting (a manager still silent): the waiting line says so.
            level = logging.DEBUG if self._wait.active else logging.INFO
            log.log(level, "asking for a new snapshot: %s", reason)
            self.resnapshots += 1
        if not self._wait.active:
            self._wait.begin()
            self._refusal = ""
        self._awaiting = set(self._topics)
        self._buffer = []
        if self._topics:
            # Until the new snapshot is in, the replica may hold objects the API no longer
            # has (a Service deleted while this worker's manager was away): no sync may
            # read it, or it would recreate a load balancer for a deleted Service.
            self._replica.synced.clear()
        self._send_hello()

    def _say_waiting(self) -> None:
        if self._topics:
            what = "for a snapshot of " + ", ".join(t.value for t in self._topics)
        else:
            what = "for its heartbeat"
        self._wait.tick(what=what, where=self.endpoints[1], why=self._refusal or "no answer")

    def _send_hello(self) -> None:
        self._hello_sent = time.monotonic()
        hello = Hello(
            session=self._session,
            worker=self._worker,
            topics=self._topics,
            view=self._view,
            endpoints=self.endpoints,
        )
        self._hello_queued = self._send(encode(hello))

    def _poll_ms(self) -> int:
        # Wake up in time to retry an unsent hello; otherwise 100 ms bounds how late the
        # heartbeat and liveness checks run.
        if self._awaiting and not self._hello_queued:
            return max(1, int(self._settings.hello_unsent_retry * 1000))
        return 100

    def _hello_wait(self) -> float:
        """How long to wait for snapshots before saying hello again."""
        if self._hello_queued:
            return self._settings.hello_retry
        return self._settings.hello_unsent_retry

    def _beat(self) -> None:
        seqs = {self._channels[topic]: seq for topic, seq in self._seqs.items()}
        beat = Heartbeat(session=self._session, seqs=seqs, worker=self._worker)
        self._send(encode(beat))

    def _report_metrics(self, registry: CollectorRegistry) -> None:
        exposition = render(registry)
        self._send(
            encode(WorkerMetrics(session=self._session, worker=self._worker, exposition=exposition))
        )

    def _send_results(self) -> None:
        for result in self._outbox.drain():
            if not self._send(encode(result)):
                self._fail(result.id, "no manager connected")

    def _send(self, payload: bytes) -> bool:
        try:
            self._dealer.send(payload, zmq.NOBLOCK)
        except zmq.Again:
            return False
        return True

    def _fail(self, result_id: ResultId, message: str) -> None:
        with self._pending_lock:
            future = self._pending.pop(result_id, None)
        if future is not None:
            failure = ActionFailure(index=0, kind=FailureKind.UNAVAILABLE, message=message)
            future.set_result(Ack(session=self._session, id=result_id, failures=(failure,)))

    def _fail_pending(self, message: str) -> None:
        with self._pending_lock:
            ids = list(self._pending)
        for result_id in ids:
            self._fail(result_id, message)


def _secure(sock: zmq.Socket[bytes], curve: ClientCurve | None) -> None:
    if curve is None:
        return
    sock.setsockopt(zmq.CURVE_SERVERKEY, curve.server_key)
    sock.setsockopt(zmq.CURVE_PUBLICKEY, curve.public_key)
    sock.setsockopt(zmq.CURVE_SECRETKEY, curve.secret_key)


def ask_cluster_id(settings: BusClientSettings, *, worker: str) -> str:
    """The cluster id, from whichever manager answers at the worker's router address (every
    replica knows it, leading or not). Asks again every second until a manager has read it:
    a worker on the bus never calls the API server itself. A long wait is said every so
    often (`ManagerWait`), naming the address."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    question = encode(WhoIs(session=SessionId(""), worker=worker))
    wait = ManagerWait(worker=worker, settings=settings.wait)
    wait.begin()
    while True:
        dealer = context.socket(zmq.DEALER)
        _secure(dealer, settings.curve)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.connect(settings.router_address)
        why = "no answer"
        try:
            dealer.send(question)
            if dealer.poll(int(settings.heartbeat_interval * 1000)):
                try:
                    answer = decode(dealer.recv())
                except (msgspec.DecodeError, msgspec.ValidationError):
                    answer = None
                if isinstance(answer, Identity) and answer.cluster_id:
                    wait.end()
                    return answer.cluster_id
                why = "it has not read the cluster id yet"
        finally:
            dealer.close()
        wait.tick(what="to tell the cluster id", where=settings.router_address, why=why)
        time.sleep(settings.heartbeat_interval)
