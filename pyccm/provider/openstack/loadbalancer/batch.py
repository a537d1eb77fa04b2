"""A pool's members in as few calls as the cloud's request body limit allows
(docs/upstream.md#octavia-objects).

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
from dataclasses import dataclass

from pyccm.provider.openstack.loadbalancer.api import (
    MEMBERS,
    STOCK_BODY_LIMIT,
    Api,
    Body,
    BodyTooLarge,
    body_size,
)
from pyccm.provider.openstack.loadbalancer.desired import PoolSpec, member_key
from pyccm.provider.openstack.loadbalancer.resources import Member

# "," between two list items, as msgspec writes them.
_SEPARATOR = 1
# Entries of `JustWritten` are used once, by the next sync; a pool that never gets one
# (its load balancer was deleted meanwhile) leaves its entry behind: keep them bounded.
MAX_JUST_WRITTEN = 10_000


@dataclass(frozen=True)
class Written:
    """What a member write of this process left in a pool: the spec's whole list (`left`
    None), or, after one call of a split, the members it left there."""

    members_print: Hashable
    left: tuple[Member, ...] | None = None


class JustWritten:
    """Pools whose members this process has just written. The next sync finds the load
    balancer ACTIVE again (Octavia applies a member call whole, or puts the load balancer
    in ERROR) and need not read the members back: at 5,000 members that is 6 pages per
    pool, per sync of a split. Each entry is used once, and only for the same specs and
    member count; a change made by hand in between that keeps the count is found by the
    next full verification instead."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pools: dict[str, Written] = {}

    def put(self, pool_id: str, written: Written) -> None:
        with self._lock:
            if len(self._pools) >= MAX_JUST_WRITTEN:
                self._pools.clear()
            self._pools[pool_id] = written

    def take(self, pool_id: str, members_print: Hashable) -> Written | None:
        with self._lock:
            written = self._pools.pop(pool_id, None)
        return written if written is not None and written.members_print == members_print else None


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
) -> tuple[Member, ...] | None:
    """One call towards `spec` (the whole list was too large). None when it converged the
    pool; else the members it left there, for the next call (in a later sync)."""
    additions, removals = additions_and_removals(spec, current)
    if additions:
        part = _add_first_part(api, lb_id, pool_id, additions)
        if len(part) == len(additions) and not removals:
            return None
        return _with_added(current, part)
    if removals:
        api.delete(MEMBERS, removals[0], lb_id=lb_id, parent=pool_id)
        if len(removals) == 1:
            return None
        return tuple(m for m in current if m.id != removals[0])
    return None


def _with_added(current: Sequence[Member], part: Sequence[Body]) -> tuple[Member, ...]:
    """`current` after an additive update with `part` (matched on address and port). The
    new members' ids are unknown (the call answers 202 with no body): a split never deletes
    a member it added, and any other change of the specs makes the next sync read again."""
    added = {
        (body["address"], body["protocol_port"]): Member(
            id="",
            name=body["name"],
            address=body["address"],
            protocol_port=body["protocol_port"],
            subnet_id=body.get("subnet_id"),
            monitor_port=body.get("monitor_port"),
        )
        for body in part
    }
    kept = (m for m in current if (m.address, m.protocol_port) not in added)
    return (*kept, *added.values())


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
