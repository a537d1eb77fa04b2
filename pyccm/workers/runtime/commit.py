"""Hands a sync's actions to the manager and waits for its ack.

The runner commits what a sync returns; a controller that must see a write land before it
goes on (the service controller adds its finalizer before any cloud call, upstream's
order) commits through the same object in the middle of its sync. One place decides what
an ack means: `None` when no ack came, else the ack, whose failures say whether a retry
could fix anything (`needs_retry`).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Protocol

from pyccm.protocol.messages import Ack, Action, FailureKind

log = logging.getLogger(__name__)

# Failures that retrying the same actions may fix; the others are final for this version
# of the object (it is gone, was re-created, or the API rejects the write for good).
RETRYABLE = frozenset({FailureKind.CONFLICT, FailureKind.UNAVAILABLE, FailureKind.NOT_LEADER})


class Submitter(Protocol):
    """Where a sync's actions go (the runner and the committer need no more)."""

    # Set while the manager asks for no writes (it is not leading, or leaving).
    paused: threading.Event

    def submit(self, key: str, actions: tuple[Action, ...]) -> Future[Ack]: ...


class Transport(Submitter, Protocol):
    """The way results reach Kubernetes: the bus, or an in-process writer (standalone),
    with the lifetime the worker process gives it."""

    @property
    def fatal(self) -> Exception | None:
        """Why the transport cannot go on (the manager refused this worker for good):
        the worker exits 2. None while it can."""
        ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


def needs_retry(ack: Ack | None) -> bool:
    """True when the actions did not all land and sending them again may help."""
    return ack is None or any(f.kind in RETRYABLE for f in ack.failures)


class Committer:
    """Bound to its transport once the worker has built it (the controller exists first)."""

    def __init__(self, *, controller: str, ack_timeout: float = 60.0) -> None:
        self._controller = controller
        self._ack_timeout = ack_timeout
        self._transport: Submitter | None = None

    def attach(self, transport: Submitter) -> None:
        self._transport = transport

    def __call__(self, key: str, actions: tuple[Action, ...]) -> Ack | None:
        assert self._transport is not None, "Committer used before attach()"
        try:
            ack = self._transport.submit(key, actions).result(timeout=self._ack_timeout)
        except FutureTimeout:
            log.warning("%s: no ack for %s within %.0fs", self._controller, key, self._ack_timeout)
            return None
        for failure in ack.failures:
            level = logging.INFO if failure.kind is FailureKind.NOT_FOUND else logging.WARNING
            log.log(
                level,
                "%s: %s: action %d failed (%s): %s",
                self._controller,
                key,
                failure.index,
                failure.kind.value,
                failure.message,
            )
        return ack
