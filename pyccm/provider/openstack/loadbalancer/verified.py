"""Load balancers known to match their specs, so that a no-op resync reads only the load
balancer itself (and its floating IP), not every listener, pool and member again.

Octavia sets a load balancer's `updated_at` on each of its status changes, and every write
to it or to one of its children (listener, pool, member, monitor) goes through one: the API
locks it PENDING_UPDATE, the driver sets it ACTIVE again. So an ACTIVE load balancer whose
`updated_at` is still the one it had when its children were last read and found to match
the same specs still matches them: its children need not be read again. Anything pyccm or
a user changes shows up as a new `updated_at`, and the next ensure reads everything.

The timestamp counts whole seconds, so a change made in the same second as the status
change before it would leave it equal. A verification therefore counts only when the load
balancer already showed that `updated_at` (ACTIVE) at least `SETTLED` before the verifying
sync began: any change after that sync's reads falls in a later second. In practice the
sync right after a create (or after a restart) reads everything, and the ones after it
read two things. Kept per process; lost on restart, which costs one full read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from pyccm.provider.openstack.loadbalancer.resources import LoadBalancer

# One second of timestamp resolution, plus a margin for the two clocks' rates.
SETTLED = 1.1

# (load balancer id, the Service's load balancer name): Services sharing one are apart.
Key = tuple[str, str]


class Verified:
    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        # load balancer id -> (updated_at, when this process first saw it ACTIVE with it)
        self._seen: dict[str, tuple[str | None, float]] = {}
        # key -> (updated_at, fingerprint of the specs its children matched)
        self._matched: dict[Key, tuple[str | None, str]] = {}
        # load balancer id -> (updated_at, whether its pools have monitors of their port's
        # protocol): read from its children like a match, valid as long.
        self._port_monitors: dict[str, tuple[str | None, bool]] = {}

    def now(self) -> float:
        return self._clock()

    def observe(self, lb: LoadBalancer) -> None:
        """`lb` was just read ACTIVE."""
        with self._lock:
            seen = self._seen.get(lb.id)
            if seen is None or seen[0] != lb.updated_at:
                self._seen[lb.id] = (lb.updated_at, self._clock())

    def unchanged(self, key: Key, lb: LoadBalancer, fingerprint: str) -> bool:
        """Whether `lb` (just read ACTIVE) still matches the specs `fingerprint` stands for."""
        with self._lock:
            return self._matched.get(key) == (lb.updated_at, fingerprint)

    def record(self, key: Key, lb: LoadBalancer, fingerprint: str, *, started: float) -> None:
        """The children of `lb` were read after `started` and matched `fingerprint` (no
        write was needed); `lb` is the ACTIVE read that sync began with."""
        with self._lock:
            if self._settled(lb, started):
                self._matched[key] = (lb.updated_at, fingerprint)
            else:
                self._matched.pop(key, None)

    def port_monitors(self, lb: LoadBalancer) -> bool | None:
        """What `record_port_monitors` found on `lb`'s pools, if it has not changed since."""
        with self._lock:
            known = self._port_monitors.get(lb.id)
        return known[1] if known is not None and known[0] == lb.updated_at else None

    def record_port_monitors(self, lb: LoadBalancer, found: bool, *, started: float) -> None:
        """The monitors of `lb`'s pools were read after `started`: `found` says whether
        some are of their port's protocol."""
        with self._lock:
            if self._settled(lb, started):
                self._port_monitors[lb.id] = (lb.updated_at, found)

    def _settled(self, lb: LoadBalancer, started: float) -> bool:
        seen = self._seen.get(lb.id)
        return lb.updated_at is None or (
            seen is not None and seen[0] == lb.updated_at and started - seen[1] >= SETTLED
        )

    def forget(self, lb_id: str) -> None:
        with self._lock:
            self._seen.pop(lb_id, None)
            self._port_monitors.pop(lb_id, None)
            for key in [k for k in self._matched if k[0] == lb_id]:
                del self._matched[key]
