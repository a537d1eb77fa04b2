"""Leader election on a coordination.k8s.io/v1 Lease, with upstream's timings and rules.

Only the leader publishes to workers and applies their results. A candidate takes over
only when the Lease record has not changed for a whole lease duration *by its own clock*
(it never trusts the timestamps in the record, so clock skew between nodes is harmless).
The leader renews every retry period; if no renewal succeeds within the renew deadline it
has lost the lease and the manager exits 1 (crash-only, docs/architecture.md#style-crash-only).

Better than upstream: `release()` on a clean shutdown clears the holder, so a standby
takes over at its next retry (~2 s) instead of waiting out the 15 s lease.

Split mode (manager/BUS.md): the holder also writes its advertised bus addresses on the
Lease, in the writes it makes anyway (acquire, renew), and removes them on release; a
standby reads them on every retry and tells the workers that reach it where the leader is.
"""

from __future__ import annotations

import logging
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec

from pyccm.flags.addresses import BUS_ENDPOINTS_ANNOTATION, format_endpoints, parse_endpoints
from pyccm.kubeapi.client import KubeClient
from pyccm.kubeapi.errors import Conflict, KubeError, NotFound
from pyccm.manager import metrics
from pyccm.protocol.decoding import decode_json

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ElectionSettings:
    namespace: str = "kube-system"
    name: str = "cloud-controller-manager"
    # Upstream: 15 s / 10 s / 2 s (renew > 1.2 x retry; lease > renew).
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    identity: str = ""
    # This manager's advertised (PUB, ROUTER) bus addresses, written on the Lease while it
    # holds it; None (no --bus-advertise-address) writes nothing and removes a stale value.
    bus_endpoints: tuple[str, str] | None = None

    def validate(self) -> None:
        if not self.lease_duration > self.renew_deadline:
            raise ValueError(
                "--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline"
            )
        if not self.renew_deadline > 1.2 * self.retry_period:
            raise ValueError(
                "--leader-elect-renew-deadline must exceed 1.2 x --leader-elect-retry-period"
            )


def default_identity() -> str:
    """`<hostname>_<uuid>`: two processes on one host never share an identity."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


class LeaseSpec(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    holder_identity: str | None = None
    lease_duration_seconds: int | None = None
    acquire_time: str | None = None
    renew_time: str | None = None
    lease_transitions: int | None = None


class LeaseMeta(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    name: str = ""
    namespace: str = ""
    resource_version: str = ""
    # Read so that a PUT writes them back: a field missing from a PUT is erased.
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


class Lease(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    metadata: LeaseMeta = LeaseMeta()
    spec: LeaseSpec = LeaseSpec()
    api_version: str = "coordination.k8s.io/v1"
    kind: str = "Lease"


Callback = Callable[[], None]


class Elector:
    def __init__(
        self,
        *,
        client: KubeClient,
        settings: ElectionSettings,
        on_started: Callback,
        on_lost: Callback,
    ) -> None:
        settings.validate()
        self._client = client
        self._settings = settings
        self.identity = settings.identity or default_identity()
        self._on_started = on_started
        self._on_lost = on_lost
        self._record: Lease | None = None
        self._observed: tuple[str, ...] = ()
        self._observed_at = 0.0
        self._last_renew = 0.0
        self._stop = threading.Event()
        self.leading = threading.Event()
        self._thread = threading.Thread(target=self.run, name="elector", daemon=True)
        self._path = f"/apis/coordination.k8s.io/v1/namespaces/{settings.namespace}/leases"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self._settings.retry_period * 3)

    def leader_bus(self) -> tuple[str, str] | None:
        """Another holder's advertised bus addresses, as this replica last read the Lease.

        None when nobody else holds it, it advertises nothing, or its record has not changed
        for a renew deadline: a leader that cannot renew within that steps down by its own
        rule (or is dead), so workers are not sent to it meanwhile.
        """
        record = self._record
        if record is None or record.spec.holder_identity in (None, "", self.identity):
            return None
        if time.monotonic() - self._observed_at > self._settings.renew_deadline:
            return None
        return parse_endpoints(record.metadata.annotations.get(BUS_ENDPOINTS_ANNOTATION, ""))

    def healthy(self) -> bool:
        """Upstream's watchdog: a leader that has not renewed for lease + 20 s is stuck."""
        if not self.leading.is_set():
            return True
        return time.monotonic() - self._last_renew <= self._settings.lease_duration + 20.0

    def run(self) -> None:
        while not self._stop.is_set():
            if self._try_acquire_or_renew():
                break
            self._stop.wait(self._settings.retry_period * random.uniform(1.0, 1.2))
        if self._stop.is_set():
            return
        self._became_leader()
        self._renew_loop()

    def _became_leader(self) -> None:
        log.info(
            "%s became leader of %s/%s",
            self.identity,
            self._settings.namespace,
            self._settings.name,
        )
        self._last_renew = time.monotonic()
        self.leading.set()
        metrics.LEADER.labels(name=self._settings.name).set(1)
        # In its own thread, as client-go runs OnStartedLeading in a goroutine: starting to
        # lead (syncing caches against a struggling API) must never hold up the renewals,
        # or the new leader loses the Lease exactly when the API is already in trouble.
        threading.Thread(target=self._on_started, name="leading", daemon=True).start()

    def _renew_loop(self) -> None:
        while not self._stop.is_set():
            deadline = time.monotonic() + self._settings.renew_deadline
            while not self._try_acquire_or_renew():
                if time.monotonic() >= deadline or self._stop.is_set():
                    break
                self._stop.wait(self._settings.retry_period)
            else:
                self._last_renew = time.monotonic()
                self._stop.wait(self._settings.retry_period)
                continue
            if self._stop.is_set():
                return
            log.error(
                "%s: leader election lost (no renewal within %.0fs)",
                self.identity,
                self._settings.renew_deadline,
            )
            self.leading.clear()
            metrics.LEADER.labels(name=self._settings.name).set(0)
            self._on_lost()
            return

    def release(self) -> bool:
        """Give the lease up now (clean shutdown): clear the holder so a standby need not wait.

        The elector is stopped first and a renewal in flight allowed to finish, so the
        release does not race it for the resourceVersion; a 409 all the same (the renewal
        landed between) is answered by re-reading the Lease and trying once more, never by
        giving up and leaving the standby to wait out the whole lease.
        """
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(self._settings.renew_deadline)
        for attempt in range(2):
            # Never clear a holder that is not us (the Lease may have been taken meanwhile).
            record = self._record
            if record is None or not self._holds(record):
                return False
            try:
                self._update(record, _released(record.spec), holding=False)
                break
            except Conflict as error:
                if attempt:
                    log.warning("could not release the lease: %s", error)
                    return False
                self._reread()
            except KubeError as error:
                log.warning("could not release the lease: %s", error)
                return False
        self.leading.clear()
        metrics.LEADER.labels(name=self._settings.name).set(0)
        log.info("%s released the lease", self.identity)
        return True

    def _reread(self) -> None:
        try:
            self._get()
        except KubeError as error:
            log.warning("could not re-read the lease to release it: %s", error)

    # --- one attempt ----------------------------------------------------------------

    def _try_acquire_or_renew(self) -> bool:
        try:
            return self._attempt()
        except KubeError as error:
            log.warning("leader election: %s", error)
            return False

    def _attempt(self) -> bool:
        now = _now()
        # Fast path for the leader: update the cached record optimistically. Only if that
        # record is still ours: after another replica took the Lease, the cached record is
        # the one `_get` read, with its current resourceVersion, and a blind PUT of it would
        # succeed, renewing the other holder's lease and keeping us a half-leader.
        record = self._record
        if record is not None and self._holds(record):
            try:
                self._update(record, _renewed(record.spec, now))
                return True
            except Conflict:
                metrics.LEADER_SLOWPATH.labels(name=self._settings.name).inc()
        current = self._get()
        if current is None:
            return self._create(now)
        self._observe(current)
        spec = current.spec
        if spec.holder_identity == self.identity:
            self._update(current, _renewed(spec, now))
            return True
        if spec.holder_identity and not self._expired():
            return False
        taken = LeaseSpec(
            holder_identity=self.identity,
            lease_duration_seconds=int(self._settings.lease_duration),
            acquire_time=now,
            renew_time=now,
            lease_transitions=(spec.lease_transitions or 0) + 1,
        )
        try:
            self._update(current, taken)
        except Conflict:
            return False
        return True

    def _holds(self, record: Lease) -> bool:
        """Upstream's IsLeader: leading, and the last record seen names us as holder."""
        return self.leading.is_set() and record.spec.holder_identity == self.identity

    def _observe(self, lease: Lease) -> None:
        spec = lease.spec
        fingerprint = (
            spec.holder_identity or "",
            spec.renew_time or "",
            lease.metadata.resource_version,
        )
        if fingerprint != self._observed:
            self._observed = fingerprint
            self._observed_at = time.monotonic()

    def _expired(self) -> bool:
        duration = self._record_duration()
        return time.monotonic() - self._observed_at > duration

    def _record_duration(self) -> float:
        seconds = self._record.spec.lease_duration_seconds if self._record else None
        return float(seconds) if seconds else self._settings.lease_duration

    def _get(self) -> Lease | None:
        try:
            data = self._client.request("GET", f"{self._path}/{self._settings.name}")
        except NotFound:
            return None
        self._record = decode_json(data, Lease)
        return self._record

    def _create(self, now: str) -> bool:
        lease = Lease(
            metadata=LeaseMeta(
                name=self._settings.name,
                namespace=self._settings.namespace,
                annotations=self._annotations({}, holding=True),
            ),
            spec=LeaseSpec(
                holder_identity=self.identity,
                lease_duration_seconds=int(self._settings.lease_duration),
                acquire_time=now,
                renew_time=now,
                lease_transitions=0,
            ),
        )
        try:
            data = self._client.request("POST", self._path, body=msgspec.to_builtins(lease))
        except Conflict:
            return False
        self._record = decode_json(data, Lease)
        return True

    def _update(self, current: Lease, spec: LeaseSpec, *, holding: bool = True) -> None:
        """PUT `spec`; the bus annotation is ours while `holding`, and gone otherwise."""
        metadata = current.metadata
        annotations = self._annotations(metadata.annotations, holding=holding)
        if annotations != metadata.annotations:
            metadata = msgspec.structs.replace(metadata, annotations=annotations)
        body = msgspec.to_builtins(msgspec.structs.replace(current, metadata=metadata, spec=spec))
        data = self._client.request("PUT", f"{self._path}/{self._settings.name}", body=body)
        self._record = decode_json(data, Lease)
        self._observe(self._record)

    def _annotations(self, current: dict[str, str], *, holding: bool) -> dict[str, str]:
        """The Lease's annotations with the bus addresses of the holder to be (or none):
        taking the Lease over replaces the previous holder's."""
        annotations = {k: v for k, v in current.items() if k != BUS_ENDPOINTS_ANNOTATION}
        endpoints = self._settings.bus_endpoints
        if holding and endpoints is not None:
            annotations[BUS_ENDPOINTS_ANNOTATION] = format_endpoints(endpoints)
        return annotations


def _released(spec: LeaseSpec) -> LeaseSpec:
    return LeaseSpec(
        holder_identity="",
        lease_duration_seconds=1,
        acquire_time=spec.acquire_time,
        renew_time=_now(),
        lease_transitions=spec.lease_transitions,
    )


def _renewed(spec: LeaseSpec, now: str) -> LeaseSpec:
    return msgspec.structs.replace(spec, renew_time=now)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
