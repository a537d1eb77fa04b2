"""Following the leader (split mode, manager/BUS.md): where a worker's bus sockets belong.

The addresses a worker is started with are *seeds*, e.g. a Service over every manager
replica. A manager that refuses the hello may name the leader's own addresses
(`Refused.leader`); the worker then closes both sockets and opens both at those addresses,
so its SUB and DEALER always reach the same manager. When that manager goes silent, says
it is leaving, or refuses without naming another, the worker goes back to its seeds and
starts over. Moves in a row without getting synced are spaced out (0.25 s doubling to
2 s), so two replicas that name each other cannot make a hot loop.

This module decides; the bus client (runtime/bus.py) moves the sockets when a move is due
and says when it is done (`moved`) and when the worker got synced (`synced`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import Counter

from pyccm.pacing import Backoff

log = logging.getLogger(__name__)

LEADER_CHANGES = Counter(
    "pyccm_bus_leader_changes_total",
    "Times a worker moved its bus sockets to the addresses a manager named as the leader's "
    "(split mode: after a start on the seed addresses, or a manager failover).",
    ["worker"],
)

# (PUB, ROUTER) addresses of one manager.
Endpoints = tuple[str, str]


@dataclass(frozen=True)
class MoveSettings:
    # The first move is at once; each further one before getting synced waits twice as
    # long as the last, from `backoff` up to `backoff_max`.
    backoff: float
    backoff_max: float
    # How long a manager that said it is leaving is not followed again: a standby may
    # still name it until it re-reads the Lease.
    forget_after: float


class LeaderFollower:
    def __init__(
        self,
        *,
        seeds: Endpoints,
        settings: MoveSettings,
        worker: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.seeds = seeds
        self._settings = settings
        self._clock = clock
        # A move decided on, and when it is due (done by the bus loop, never while a
        # socket is being read).
        self._move_to: Endpoints | None = None
        self._move_due = 0.0
        self._moved_at = -float("inf")
        # Moved since the worker last got synced: a further move backs off.
        self._unsynced = False
        self._backoff = Backoff(base=settings.backoff, cap=settings.backoff_max)
        # The manager that last said it was leaving, and when.
        self._left: tuple[Endpoints, float] | None = None
        self.leader_changes = 0
        self._leader_changes = LEADER_CHANGES.labels(worker=worker)

    @property
    def moving(self) -> bool:
        """A move is decided: nothing the current manager says matters any more."""
        return self._move_to is not None

    def due(self, now: float) -> Endpoints | None:
        """Where to move now, if a move is due."""
        if self._move_to is not None and now >= self._move_due:
            return self._move_to
        return None

    def plan(self, endpoints: Endpoints) -> None:
        if self._move_to is not None:
            return
        delay = self._backoff.next() if self._unsynced else 0.0
        self._move_to = endpoints
        self._move_due = max(self._clock(), self._moved_at + delay)

    def moved(self, endpoints: Endpoints, *, at: float) -> None:
        """The sockets were opened at `endpoints` at `at`."""
        self._move_to = None
        self._moved_at = at
        self._unsynced = True
        if endpoints == self.seeds:
            log.info("back to the seed addresses %s, %s", *endpoints)
        else:
            log.info("following the leader at %s, %s", *endpoints)
            self.leader_changes += 1
            self._leader_changes.inc()

    def synced(self) -> None:
        """The worker got what it needed from the manager it is at: moves start over."""
        self._unsynced = False
        self._backoff.reset()

    def refused(self, *, leader: tuple[str, ...], reason: str, here: Endpoints) -> None:
        """The manager at `here` refused the hello (not fatally), naming `leader` or not."""
        if self._just_left(leader):
            # A standby that has not re-read the Lease since the leader released it still
            # names the leader that just said it is leaving: that is no leader.
            leader = ()
        if len(leader) == 2 and leader != here:
            self.plan((leader[0], leader[1]))
        elif not leader and here != self.seeds:
            # The manager we followed no longer leads and knows no one who does.
            log.info("the manager at %s refused (%s)", here[1], reason)
            self.plan(self.seeds)
        else:
            # Asked again every hello_retry: the waiting line says it every so often.
            log.debug("manager not serving yet (%s); asking again", reason)

    def leaving(self, here: Endpoints) -> None:
        """The manager at `here` says it is leaving (it released the Lease)."""
        if here != self.seeds:
            log.info("the manager at %s is leaving", here[1])
            self._left = (here, self._clock())
            self.plan(self.seeds)

    def silent(self, here: Endpoints) -> bool:
        """The manager at `here` went silent: True when the worker goes back to its seeds,
        False when it is at them already (it asks them again)."""
        if here == self.seeds:
            return False
        log.info("the manager at %s went silent", here[1])
        self.plan(self.seeds)
        return True

    def _just_left(self, leader: tuple[str, ...]) -> bool:
        if self._left is None:
            return False
        endpoints, when = self._left
        return leader == endpoints and self._clock() - when < self._settings.forget_after
