"""A worker's side of the bus: SUB for deltas, DEALER for hello/snapshots/results/acks.

The Clone pattern, client half (docs/architecture.md#bus-clone): subscribe first, then ask for a
snapshot; the
sequencing (runtime/clone.py) says when to ask again, and so do 3 s of silence.

Like the server, one thread owns both sockets; sync threads hand it results through an
inproc socket and wait on a Future for the manager's `Ack`. Results in flight when the
manager goes away are failed as `UNAVAILABLE`, so their syncs retry against the next
manager instead of waiting forever.

The parts that need no socket live apart, each testable alone: the Clone sequencing
(runtime/clone.py), following the leader across manager replicas (runtime/leader.py), the
metrics a split-mode worker sends (runtime/metrics_report.py), the CURVE handshake watch
(runtime/handshakes.py), and saying what it waits for (runtime/waiting.py). This module
owns the sockets and the loop that drives them.
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
from prometheus_client import Counter

from pyccm.flags.addresses import ClientCurve, require_curve
from pyccm.protocol.bus_settings import HEARTBEAT_INTERVAL, LINGER, SILENCE_TIMEOUT, secure_client
from pyccm.protocol.drops import DropLog
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
    SessionId,
    Snapshot,
    Topic,
    WhoIs,
    decode,
    encode,
)
from pyccm.protocol.projections import channel
from pyccm.workers.runtime.clone import Clone, Step
from pyccm.workers.runtime.handshakes import REFUSED, Handshakes
from pyccm.workers.runtime.handshakes import watch as watch_handshakes
from pyccm.workers.runtime.leader import Endpoints, LeaderFollower, MoveSettings
from pyccm.workers.runtime.metrics_report import MetricsReport
from pyccm.workers.runtime.replica import Replica
from pyccm.workers.runtime.waiting import ManagerWait, WaitSettings

log = logging.getLogger(__name__)

DELTAS_RECEIVED = Counter(
    "pyccm_bus_deltas_received_total",
    "Deltas a worker applied to its replica (each one may wake its controller), by topic.",
    ["worker", "topic"],
)


@dataclass(frozen=True)
class BusClientSettings:
    pub_address: str
    router_address: str
    # How long a silent manager is waited for: three missed beats mean it is gone.
    silence_timeout: float = SILENCE_TIMEOUT
    # How long to wait for snapshots before asking again (a refused or lost hello).
    hello_retry: float = 1.0
    # A hello that could not even be queued (no connection yet: a CURVE handshake takes a
    # few ms longer than the first send) is retried this soon instead of after hello_retry.
    hello_unsent_retry: float = 0.02
    # CURVE keys (flags/addresses.py): required for any address that is not ipc://,
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
        if self.monitor is not None:
            self.dealer.disable_monitor()
            self.monitor.close(linger=LINGER)
        self.sub.close(linger=LINGER)
        self.dealer.close(linger=LINGER)


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
        received = {
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
        self._handshakes = Handshakes()
        self._drops = DropLog(side="worker")
        # What the worker is waiting for, said every so often until the manager answers;
        # `_refusal` is why it did not (its last refusal), "" for no answer at all.
        self._wait = ManagerWait(worker=worker, settings=settings.wait)
        self._refusal = ""
        # Sync state, owned by the bus thread.
        self._clone = Clone(
            channels=self._channels, replica=replica, applied=lambda t: received[t].inc()
        )
        self._last_heard = time.monotonic()
        self._hello_sent = 0.0
        self._hello_queued = False
        # Where the worker was started to dial (the seeds), where it belongs now, and where
        # it is connected (`_link`).
        self._leader = LeaderFollower(
            seeds=(settings.pub_address, settings.router_address),
            settings=MoveSettings(
                backoff=settings.move_backoff,
                backoff_max=settings.move_backoff_max,
                forget_after=settings.silence_timeout,
            ),
            worker=worker,
        )
        self._link: _Link | None = None
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

    @property
    def leader_changes(self) -> int:
        """Moves to a manager named as the leader (pyccm_bus_leader_changes_total)."""
        return self._leader.leader_changes

    @property
    def handshake_failures(self) -> int:
        """CURVE handshakes the manager turned down (an unknown key or the wrong server key)."""
        return self._handshakes.failures

    @property
    def endpoints(self) -> Endpoints:
        """The (PUB, ROUTER) addresses the worker is connected to now (bus thread's view)."""
        return self._link.endpoints if self._link is not None else self._leader.seeds

    # --- the bus thread ---------------------------------------------------------------

    def _run(self) -> None:
        self._link = self._open(self._leader.seeds)
        self._ready.set()
        next_beat = 0.0
        report = MetricsReport(
            router_address=self._settings.router_address,
            session=self._session,
            worker=self._worker,
        )
        try:
            self._resnapshot(reason="start")
            while not self._stop.is_set() and self.fatal is None:
                self._poll_once()
                now = time.monotonic()
                if self._leader.moving:
                    target = self._leader.due(now)
                    if target is not None:
                        self._move(target)
                    continue
                if now >= next_beat:
                    self._beat()
                    next_beat = now + HEARTBEAT_INTERVAL
                metrics = report.due(now)
                if metrics is not None:
                    self._send(metrics)
                self._check_liveness(now)
                if self._wait.active:
                    self._say_waiting()
        finally:
            self._fail_pending("bus client stopped")
            self._link.close()

    def _poll_once(self) -> None:
        link = self._link
        assert link is not None
        events = dict(link.poller.poll(self._poll_ms()))
        if link.sub in events:
            self._drain(link.sub, multipart=True)
        if link.dealer in events:
            self._drain(link.dealer, multipart=False)
        if self._outbox.fileno() in events:
            self._send_results()
        monitor = link.monitor
        if (
            monitor is not None
            and monitor in events
            and self._handshakes.read(monitor, where=self.endpoints[1])
        ):
            self._refusal = REFUSED

    def _open(self, endpoints: Endpoints) -> _Link:
        pub, router = endpoints
        sub = self._context.socket(zmq.SUB)
        for name in (*self._channels.values(), Topic.CONTROL.value):
            sub.setsockopt(zmq.SUBSCRIBE, name.encode())
        secure_client(sub, self._settings.curve)
        sub.connect(pub)
        dealer = self._context.socket(zmq.DEALER)
        secure_client(dealer, self._settings.curve)
        # Queue nothing for a manager that is not there: results fail fast instead.
        dealer.setsockopt(zmq.IMMEDIATE, 1)
        dealer.connect(router)
        # With CURVE, a refused key would otherwise look like a manager that never answers.
        monitor = None if self._settings.curve is None else watch_handshakes(dealer)
        link = _Link(endpoints=endpoints, sub=sub, dealer=dealer, monitor=monitor)
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

    def _move(self, endpoints: Endpoints) -> None:
        """Close both sockets, open both at `endpoints`, and start over with a hello."""
        assert self._link is not None
        self._fail_pending("the worker is moving to another manager")
        self._link.close()
        self._link = self._open(endpoints)
        self._handshakes.new_link()
        self._last_heard = time.monotonic()
        self._leader.moved(endpoints, at=self._last_heard)
        self._resnapshot(reason="moved")

    def _on_refused(self, refused: Refused) -> None:
        if refused.fatal:
            log.error("the manager refused this worker: %s", refused.reason)
            self.fatal = FatalBusError(refused.reason)
            return
        self._leader.refused(
            leader=tuple(refused.leader), reason=refused.reason, here=self.endpoints
        )
        self._refusal = f"it refused ({refused.reason})"

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
            if self._leader.moving:
                continue  # leaving this manager: nothing it says matters any more
            self._last_heard = time.monotonic()
            self._handle(message)

    def _handle(self, message: Message) -> None:
        match message:
            case Delta():
                self._follow(self._clone.delta(message), message)
            case Snapshot():
                self._follow(self._clone.snapshot(message), message)
            case Heartbeat():
                if message.paused:
                    self.paused.set()
                else:
                    self.paused.clear()
                self._follow(self._clone.heartbeat(message), message)
            case Ack():
                self._on_ack(message)
            case Pause():
                self.paused.set()
                if message.leaving:
                    self._leader.leaving(self.endpoints)
            case Resume():
                self.paused.clear()
            case Refused():
                self._on_refused(message)
            case _:
                self._drops.dropped(
                    ValueError(f"unexpected {type(message).__name__} from the manager")
                )

    def _follow(self, step: Step, message: Message) -> None:
        """Do what the sequencing says a message calls for."""
        if step.foreign and isinstance(message, Delta):
            self._drops.dropped(ValueError(f"a delta of {message.topic.value}, not subscribed"))
        if step.taken and isinstance(message, Snapshot) and message.paused:
            self.paused.set()
        if step.resync:
            self._ask_snapshots(reason=step.resync)
        if step.synced:
            self._leader.synced()
            self._wait.end()
            if self._topics:
                log.info("replica synced from the manager at %s", self.endpoints[1])

    def _on_ack(self, ack: Ack) -> None:
        with self._pending_lock:
            future = self._pending.pop(ack.id, None)
        if future is not None:
            future.set_result(ack)

    def _check_liveness(self, now: float) -> None:
        if now - self._last_heard > self._settings.silence_timeout:
            self._fail_pending("the manager went silent")
            self._last_heard = now
            if not self._leader.silent(self.endpoints):
                self._resnapshot(reason="manager silent")
        elif self._hello_due() and now - self._hello_sent > self._hello_wait():
            self._send_hello()

    def _hello_due(self) -> bool:
        # A worker with no topics gets no snapshot to end its waiting, so it keeps saying
        # hello: that is how a standby, once it knows the leader, can send it there.
        return self._clone.awaiting or not self._topics

    def _resnapshot(self, *, reason: str) -> None:
        """Start the sequencing over and ask for new snapshots (the caller's reasons: the
        start, a silent manager, a move)."""
        self._clone.restart()
        self._ask_snapshots(reason=reason)

    def _ask_snapshots(self, *, reason: str) -> None:
        """The sequencing has started over (`Clone.restart`): say why, and say hello."""
        if reason != "start":
            # Again while waiting (a manager still silent): the waiting line says so.
            level = logging.DEBUG if self._wait.active else logging.INFO
            log.log(level, "asking for a new snapshot: %s", reason)
            self.resnapshots += 1
        if not self._wait.active:
            self._wait.begin()
            self._refusal = ""
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
        if self._clone.awaiting and not self._hello_queued:
            return max(1, int(self._settings.hello_unsent_retry * 1000))
        return 100

    def _hello_wait(self) -> float:
        """How long to wait for snapshots before saying hello again."""
        if self._hello_queued:
            return self._settings.hello_retry
        return self._settings.hello_unsent_retry

    def _beat(self) -> None:
        beat = Heartbeat(
            session=self._session, seqs=self._clone.channel_seqs(), worker=self._worker
        )
        self._send(encode(beat))

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
        secure_client(dealer, settings.curve)
        dealer.setsockopt(zmq.LINGER, LINGER)
        dealer.connect(settings.router_address)
        why = "no answer"
        try:
            dealer.send(question)
            if dealer.poll(int(HEARTBEAT_INTERVAL * 1000)):
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
        time.sleep(HEARTBEAT_INTERVAL)
