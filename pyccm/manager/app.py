"""The manager process: wires the elector, informers, cache, bus, writer and HTTP together.

Order of a leadership term: start the informers, wait for both caches to sync, then
serve the bus (answer snapshots, publish deltas, accept results). On SIGTERM: pause the
workers, release the Lease, exit 0. On a lost Lease: pause the workers, exit 1
(crash-only; supervisord restarts us as a candidate).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from types import FrameType

from pyccm.flags.load_balancer_class import UNCLASSED, LoadBalancerClasses
from pyccm.kubeapi.client import KubeClient, KubeSettings
from pyccm.kubeapi.cluster import read_cluster_id
from pyccm.kubeapi.informer import NODES, SERVICES, Informer
from pyccm.kubeapi.reviews import Reviews
from pyccm.kubeapi.writer import Writer
from pyccm.manager.access import AccessSettings, Gate
from pyccm.manager.bus import BusServer, BusSettings, WorkerIdentity
from pyccm.manager.election import ElectionSettings, Elector
from pyccm.manager.http import Checks, HttpServer
from pyccm.manager.serving import ServingSettings
from pyccm.manager.store import Cache
from pyccm.pacing import Backoff
from pyccm.protocol.bus_settings import SILENCE_TIMEOUT
from pyccm.protocol.messages import Ack, Delta, ObjectRef, RecordEvent, Result, SessionId
from pyccm.protocol.projections import views

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ManagerSettings:
    kube: KubeSettings
    bus: BusSettings
    election: ElectionSettings = field(default_factory=ElectionSettings)
    leader_elect: bool = True
    # The HTTPS port (--secure-port 0: none) and who may read it.
    serving: ServingSettings = field(default_factory=ServingSettings)
    access: AccessSettings = field(default_factory=AccessSettings)
    # Workers /healthz expects (one check each).
    expected_workers: tuple[str, ...] = ()
    # Parallel writes to the API (each also waits for the QPS bucket).
    writer_threads: int = 8
    # --load-balancer-class(-only): the Services the service view carries; upstream's
    # default, only those without a class.
    load_balancer_classes: LoadBalancerClasses = UNCLASSED
    # --cluster-id; "" = read the kube-system namespace's UID (and hand it to the workers).
    cluster_id: str = ""


def review_client_settings(settings: ManagerSettings) -> KubeSettings:
    """The reviews' own client, with the manager's credentials: upstream gives delegated
    auth its own, with QPS 200 and burst 400, so a burst of scrapes never waits behind (or
    starves) the writer's bucket."""
    return replace(settings.kube, qps=200.0, burst=400)


class Manager:
    def __init__(self, *, settings: ManagerSettings) -> None:
        self._settings = settings
        self.session = SessionId(uuid.uuid4().hex)
        self._client = KubeClient(settings=settings.kube)
        self._pool = ThreadPoolExecutor(settings.writer_threads, thread_name_prefix="writer")
        self.cache = Cache(
            session=self.session,
            publish=self._publish,
            views=views(settings.load_balancer_classes),
        )
        self._writer = Writer(
            client=self._client,
            cached_node=self.cache.nodes.get,
            cached_service=self.cache.services.get,
            may_write=self._may_write,
        )
        self.bus = BusServer(
            settings=settings.bus,
            session=self.session,
            cache=self.cache,
            on_result=self._on_result,
            leader_bus=self._leader_bus,
            cluster_id=lambda: self._cluster_id,
        )
        self._cluster_id = settings.cluster_id
        self._informers = (
            Informer(client=self._client, resource=NODES, sink=self.cache.nodes),
            Informer(client=self._client, resource=SERVICES, sink=self.cache.services),
        )
        self._elector = Elector(
            client=self._client,
            # The Lease names the bus this manager advertises (manager/BUS.md).
            settings=replace(settings.election, bus_endpoints=settings.bus.advertise),
            on_started=self._lead,
            on_lost=self._lost,
        )
        self._reviews: Reviews | None = None
        self._http: HttpServer | None = None
        if settings.serving.port:
            self._reviews = Reviews(client=KubeClient(settings=review_client_settings(settings)))
            gate = Gate(settings=settings.access, reviewer=self._reviews)
            self._http = HttpServer(
                serving=settings.serving,
                checks=self._checks(),
                gate=gate,
                worker_metrics=self.bus.worker_metrics,
            )
        self._done = threading.Event()
        # Set when this manager starts letting its Lease go (SIGTERM) or has lost it: from
        # then on its writer sends nothing, so two managers never write at once.
        self._letting_go = threading.Event()
        # When this replica started serving workers (None while it does not): only the
        # leader serves them, so only the leader can miss one.
        self._serving_since: float | None = None
        # Starting to serve and letting go never interleave (they run on different threads).
        self._transition = threading.Lock()
        self.exit_code = 0

    def _publish(self, channel: str, delta: Delta) -> None:
        self.bus.publish(channel, delta)

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._terminate)
        signal.signal(signal.SIGINT, self._terminate)
        self.bus.start()
        if not self._cluster_id:
            threading.Thread(target=self._read_cluster_id, name="cluster-id", daemon=True).start()
        if self._http:
            self._http.start()
        if self._settings.leader_elect:
            self._elector.start()
        else:
            threading.Thread(target=self._lead, name="lead", daemon=True).start()
        # Never an unbounded wait here: a SIGTERM delivered to another thread (zmq's,
        # an informer's) only runs its Python handler once the main thread runs bytecode,
        # and a main thread asleep in Event.wait() never does: the handler ran 27 s late.
        while not self._done.wait(0.2):
            pass
        self.bus.stop()
        if self._http:
            self._http.stop()
        if self._reviews:
            self._reviews.close()
        return self.exit_code

    def _read_cluster_id(self) -> None:
        """The kube-system namespace's UID, read once (any replica: workers ask whichever
        they reach), with backoff while the API server does not answer."""
        backoff = Backoff(base=1.0, cap=30.0)
        while not self._done.is_set():
            try:
                self._cluster_id = read_cluster_id(self._client)
            except Exception as error:  # the API down, RBAC without get on namespaces
                delay = backoff.next()
                log.warning("cannot read the cluster id yet (%s); retrying in %.0fs", error, delay)
                self._done.wait(delay)
                continue
            log.info("cluster id %s (the kube-system namespace's UID)", self._cluster_id)
            return

    # --- leadership -------------------------------------------------------------------

    def _lead(self) -> None:
        log.info("leading: starting informers")
        for informer in self._informers:
            informer.start()
        while not self.cache.synced() and not self._letting_go.is_set():
            time.sleep(0.05)
        with self._transition:
            # Leading starts on its own thread: a SIGTERM or a lost Lease may have come first.
            if self._letting_go.is_set():
                return
            self.bus.serve(True)
            self.bus.resume()
            self._serving_since = time.monotonic()
        log.info(
            "caches synced (%d nodes, %d services); serving workers",
            len(self.cache.nodes),
            len(self.cache.services),
        )
        self._leader_event("became leader")

    def _leader_bus(self) -> tuple[str, str] | None:
        """Where workers find the leader's bus: ours while we lead, else the Lease's word;
        none while we let go (the worker goes back to its seed addresses meanwhile)."""
        if self._letting_go.is_set():
            return None
        if self._leading():
            return self._settings.bus.advertise
        return self._elector.leader_bus()

    def _may_write(self) -> bool:
        return self._leading() and not self._letting_go.is_set()

    def _lost(self) -> None:
        with self._transition:
            self._letting_go.set()
            self._serving_since = None
            self.bus.pause("lost the lease", leaving=True)
            self.bus.serve(False)
        time.sleep(0.2)  # let the pause reach the workers before we die
        self.exit_code = 1
        self._done.set()

    def _terminate(self, signum: int, frame: FrameType | None) -> None:
        log.info("signal %d: pausing workers and releasing the lease", signum)
        with self._transition:
            self._letting_go.set()
            self.bus.pause("manager shutting down", leaving=True)
            self.bus.serve(False)
        for informer in self._informers:
            informer.stop()
        if self._settings.leader_elect:
            threading.Thread(target=self._release, name="release", daemon=True).start()
        else:
            self._done.set()

    def _release(self) -> None:
        self._elector.release()
        self._done.set()

    def _leader_event(self, what: str) -> None:
        election = self._settings.election
        event = RecordEvent(
            regarding=ObjectRef(
                kind="Lease",
                name=election.name,
                namespace=election.namespace,
                api_version="coordination.k8s.io/v1",
            ),
            reason="LeaderElection",
            message=f"{self._elector.identity} {what}",
            component="cloud-controller-manager",
        )
        self._pool.submit(self._writer.apply, (event,))

    # --- results ----------------------------------------------------------------------

    def _on_result(self, identity: WorkerIdentity, result: Result) -> None:
        self._pool.submit(self._apply, identity, result)

    def _apply(self, identity: WorkerIdentity, result: Result) -> None:
        failures = self._writer.apply(result.actions)
        self.bus.send(identity, Ack(session=self.session, id=result.id, failures=failures))

    # --- health -----------------------------------------------------------------------

    def _checks(self) -> Checks:
        healthz = {"leaderElection": self._leader_check}
        for name in self._settings.expected_workers:
            healthz[f"worker-{name}"] = self._worker_check(name)
        readyz = dict(healthz)
        readyz["informer-sync"] = lambda: (
            None if self.cache.synced() or not self._leading() else "caches not synced"
        )
        readyz["informer-watch"] = self._watch_check
        return Checks(healthz=healthz, readyz=readyz)

    def _watch_check(self) -> str | None:
        """A leader whose watch is down serves a cache that no longer changes: not ready."""
        if not self._leading():
            return None
        down = [i.resource_name for i in self._informers if not i.watching.is_set()]
        return f"no open watch of {', '.join(down)}" if down else None

    def _leading(self) -> bool:
        return self._elector.leading.is_set() or not self._settings.leader_elect

    def _leader_check(self) -> str | None:
        return (
            None
            if self._elector.healthy()
            else "the lease was not renewed for lease duration + 20s"
        )

    def _worker_check(self, name: str) -> Callable[[], str | None]:
        """A worker silent for 3 heartbeats fails the check, on the leader only: a standby
        serves no workers (in split mode they talk to the leader alone), and a new leader
        gives them one lease duration to find it before "not connected" counts."""

        def check() -> str | None:
            since = self._serving_since
            if since is None:
                return None
            state = self.bus.workers().get(name)
            now = time.monotonic()
            if state is None or state.last_seen < since:
                waited = now - since
                grace = self._settings.election.lease_duration
                return None if waited <= grace else f"not connected for {waited:.0f}s"
            silent = now - state.last_seen
            return None if silent <= SILENCE_TIMEOUT else f"silent for {silent:.0f}s"

        return check
