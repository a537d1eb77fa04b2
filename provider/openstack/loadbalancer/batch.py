"""A pool's members in as few calls as the cloud's request body limit allows (§3.5).

One batch update (`PUT /lbaas/pools/{id}/members` with every member the pool should have)
converges a pool in one call, whatever changed: a burst of 100 nodes joining and 100
leaving is one call per pool. Octavia matches the listed members to the existing ones by
(address, protocol port): new ones are created, listed ones updated, the others deleted.

That list can be over the cloud's body limit (oslo.middleware's 114,688 bytes by default;
a member is ~70-120 bytes, so ~1,000-1,600 members). The call is then answered 413 and
nothing is done; `Api` learns the limit, and the pool is converged in parts instead:

* missing (or changed) members go in `additive_only` batch updates, which add and update
  the members they list and keep every other one: as many members per call as fit;
* members to remove have no batch form (a non-additive list must name every member to
  keep, which is what did not fit): one `DELETE /members/{id}` each.

Each call leaves the load balancer PENDING_UPDATE, so a sync makes one and the next sync
(after `RetryAfter`) re-reads the pool and carries on: a crash or a failed call at any
point loses and duplicates nothing, since every step is computed from the cloud's state.
Additions go first: nodes that joined serve traffic one load-balancer cycle later,
however many members are left to remove. Everything here is linear in the members.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence

from provider.openstack.loadbalancer.api import (
    STOCK_BODY_LIMIT,
    Api,
    Body,
    BodyTooLarge,
    body_size,
)
from provider.openstack.loadbalancer.desired import PoolSpec, member_key
from provider.openstack.loadbalancer.resources import Member

# ", " between two list items, as json.dumps writes them.
_SEPARATOR = 2
# Entries of `JustWritten` are used once, by the next sync; a pool that never gets one
# (its load balancer was deleted meanwhile) leaves its entry behind: keep them bounded.
MAX_JUST_WRITTEN = 10_000


class JustWritten:
    """Pools whose whole member list this process has just replaced, with a print of what
    it sent. The next sync finds the load balancer ACTIVE again (a batch update applies the
    whole list, or puts the load balancer in ERROR) and need not read the members back to
    compare: at 5,000 members that is 6 pages per pool. Each entry is used once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pools: dict[str, Hashable] = {}

    def put(self, pool_id: str, members: Hashable) -> None:
        with self._lock:
            if len(self._pools) >= MAX_JUST_WRITTEN:
                self._pools.clear()
            self._pools[pool_id] = members

    def take(self, pool_id: str) -> Hashable | None:
        with self._lock:
            return self._pools.pop(pool_id, None)


def additions_and_removals(
    spec: PoolSpec, current: Sequence[Member]
) -> tuple[list[Body], list[str]]:
    """(bodies of the members to add or update, ids of the members to delete)."""
    have = {member_key(m) for m in current}
    additions = [body for key, body in spec.members.items() if key not in have]
    kept = {(body["address"], body["protocol_port"]) for body in spec.members.values()}
    removals = [m.id for m in current if (m.address, m.protocol_port) not in kept]
    return additions, removals


def first_part(bodies: Sequence[Body], limit: int) -> list[Body]:
    """The longest prefix of `bodies` whose batch update fits in `limit` bytes (at least
    one member: a single member over the limit is the cloud's 413 to report)."""
    size = body_size({"members": []})
    part: list[Body] = []
    for body in bodies:
        item = body_size(body) + (_SEPARATOR if part else 0)
        if part and size + item > limit:
            break
        part.append(body)
        size += item
    return part


def converge_in_parts(
    api: Api, lb_id: str, spec: PoolSpec, pool_id: str, current: Sequence[Member]
) -> bool:
    """One call towards `spec` (the whole list was too large). True when the pool is
    converged by it; False when more calls are needed (in later syncs)."""
    additions, removals = additions_and_removals(spec, current)
    if additions:
        part = _add_first_part(api, lb_id, pool_id, additions)
        return len(part) == len(additions) and not removals
    if removals:
        api.delete_member(lb_id, pool_id, removals[0])
        return len(removals) == 1
    return True


def _add_first_part(api: Api, lb_id: str, pool_id: str, additions: Sequence[Body]) -> list[Body]:
    """Add as many of `additions` as fit; a part answered 413 (the limit is lower than
    guessed) taught a lower limit and did nothing, so a smaller one is tried at once."""
    while True:
        part = first_part(additions, api.body_limit.bytes or STOCK_BODY_LIMIT)
        try:
            api.add_members(lb_id, pool_id, part)
            return part
        except BodyTooLarge:
            if len(part) == 1:
                raise
