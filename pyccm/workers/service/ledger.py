"""What this process last did for each Service it owns, and nothing else.

The service worker's decisions (`decision.py`) compare a Service with what was last done
for it; this module keeps that record: the copy acted on, the `needsUpdate` print of the
last successful ensure, the backends last given to the load balancer, the Services due
for a drift resync, the cleanups that landed but whose echo has not arrived yet, and the
deleted Services of another class whose cleanup waits for their own controller. One
lock guards it; no method calls out while holding it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace

from pyccm.protocol.views import LoadBalancerIngress, Service
from pyccm.workers.service.policy import BackendId


@dataclass(frozen=True)
class Synced:
    """What this process last did for a Service: the copy it acted on (to delete its load
    balancer if the Service vanishes without a finalizer or comes back with a new UID),
    the `needsUpdate` print of its last successful ensure (None: ensure again) and the
    backends the load balancer was last given: those of the backend set that pass the
    Service's node selector (the whole set, the same object, without one), and the
    ingress its status had once the writes landed: a status that no longer shows it was
    changed by another writer (a GitOps tool applying the Service without its status), and
    the next sync puts it back."""

    service: Service
    spec: tuple[object, ...] | None
    backends: frozenset[BackendId]
    ingress: tuple[LoadBalancerIngress, ...]


@dataclass(frozen=True)
class Entry:
    """A key's record as a sync reads it: what was last done (`last`), whether the drift
    resync is due, and the UID whose cleanup landed and whose echo is still to come."""

    last: Synced | None
    resync_due: bool
    cleaned_uid: str | None


class Ledger:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._synced: dict[str, Synced] = {}
        self._resync_due: set[str] = set()
        # Services whose cleanup landed (key -> uid): a re-run before the watch shows the
        # finalizer gone must not call the cloud again.
        self._cleaned: dict[str, str] = {}
        # Another class's Services whose cleanup is left to their owner first (key -> when
        # this process first planned it).
        self._owner_waits: dict[str, float] = {}

    # --- reads --------------------------------------------------------------------------

    def entry(self, key: str) -> Entry:
        """What a sync of `key` decides from, read under one lock."""
        with self._lock:
            return Entry(
                last=self._synced.get(key),
                resync_due=key in self._resync_due,
                cleaned_uid=self._cleaned.get(key),
            )

    def knows(self, key: str) -> bool:
        with self._lock:
            return key in self._synced

    def snapshot(self) -> dict[str, Synced]:
        with self._lock:
            return dict(self._synced)

    # --- writes -------------------------------------------------------------------------

    def deleted(self, key: str) -> bool:
        """The Service left the replica: a landed cleanup is over. True when this process
        acted on it (its load balancer may need deleting)."""
        with self._lock:
            self._cleaned.pop(key, None)
            return key in self._synced

    def due_for_resync(self, keys: Iterable[str]) -> None:
        with self._lock:
            self._resync_due.update(keys)

    def acting_on(self, key: str, service: Service) -> None:
        """The first cloud call for a Service this process has not recorded yet: remember
        the copy (with no print, so the next sync ensures again), so that a Service deleted
        meanwhile without our finalizer leads to a cleanup, not a leak."""
        with self._lock:
            self._synced.setdefault(
                key, Synced(service=service, spec=None, backends=frozenset(), ingress=())
            )

    def record(self, key: str, synced: Synced) -> None:
        with self._lock:
            self._synced[key] = synced
            self._resync_due.discard(key)
            self._cleaned.pop(key, None)

    def ensure_next(self, key: str) -> None:
        """The next sync runs a full ensure (upstream's answer to a failed member update)."""
        with self._lock:
            prior = self._synced.get(key)
            if prior is not None:
                self._synced[key] = replace(prior, spec=None)

    def forget(self, key: str) -> None:
        with self._lock:
            self._synced.pop(key, None)
            self._resync_due.discard(key)
            self._cleaned.pop(key, None)

    def cleaned_up(self, key: str, uid: str) -> None:
        """The cleanup of the Service `uid` landed (finalizer removal acked)."""
        with self._lock:
            self._synced.pop(key, None)
            self._resync_due.discard(key)
            self._cleaned[key] = uid

    def waiting_for_owner(self, key: str, now: float) -> float:
        """When this process first left the cleanup of `key` to its owner (`now` if it did
        not yet)."""
        with self._lock:
            return self._owner_waits.setdefault(key, now)

    def owner_wait_over(self, key: str) -> None:
        with self._lock:
            self._owner_waits.pop(key, None)
