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

from msgspec import Raw

from pyccm.provider.openstack.loadbalancer.api import (
    ENVELOPE,
    MEMBERS,
    STOCK_BODY_LIMIT,
    Api,
    BodyTooLarge,
)
from pyccm.provider.openstack.loadbalancer.desired import PoolSpec
from pyccm.provider.openstack.loadbalancer.members import Backend
from pyccm.provider.openstack.loadbalancer.resources import Member

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
) -> tuple[list[Backend], list[str]]:
    """(the nodes whose members to add or update, ids of the members to delete)."""
    if not spec.member_port:
        return [], [m.id for m in current]
    have = {(m.name, m.address) for m in current if spec.has(m)}
    additions = [backend for backend in spec.backends if backend not in have]
    kept = {address for _, address in spec.wanted}
    removals = [
        m.id for m in current if m.protocol_port != spec.member_port or m.address not in kept
    ]
    return additions, removals


def first_part(spec: PoolSpec, backends: Sequence[Backend], limit: int) -> tuple[Raw, int]:
    """The member list of the longest prefix of `backends` whose batch update fits in
    `limit` bytes (at least one member: a single member over the limit is the cloud's 413
    to report), and that prefix's length."""
    buf = bytearray(b"[")
    count = 0
    for backend in backends:
        mark = len(buf)
        if count:
            buf += b","
        spec.write_member(buf, backend)
        if count and ENVELOPE + len(buf) + 1 > limit:
            del buf[mark:]
            break
        count += 1
    buf += b"]"
    return Raw(buf), count


def converge_in_parts(
    api: Api, lb_id: str, spec: PoolSpec, pool_id: str, current: Sequence[Member]
) -> tuple[Member, ...] | None:
    """One call towards `spec` (the whole list was too large). None when it converged the
    pool; else the members it left there, for the next call (in a later sync)."""
    additions, removals = additions_and_removals(spec, current)
    if additions:
        part = _add_first_part(api, lb_id, spec, pool_id, additions)
        if len(part) == len(additions) and not removals:
            return None
        return _with_added(spec, current, part)
    if removals:
        api.delete(MEMBERS, removals[0], lb_id=lb_id, parent=pool_id)
        if len(removals) == 1:
            return None
        return tuple(m for m in current if m.id != removals[0])
    return None


def _with_added(
    spec: PoolSpec, current: Sequence[Member], part: Sequence[Backend]
) -> tuple[Member, ...]:
    """`current` after an additive update with the members of `part` (matched on address
    and port). The new members' ids are unknown (the call answers 202 with no body): a
    split never deletes a member it added, and any other change of the specs makes the next
    sync read again."""
    added = {
        (address, spec.member_port): Member(
            id="",
            name=name,
            address=address,
            protocol_port=spec.member_port,
            subnet_id=spec.subnet_of(address) or None,
            monitor_port=spec.monitor_port,
        )
        for name, address in part
    }
    kept = (m for m in current if (m.address, m.protocol_port) not in added)
    return (*kept, *added.values())


def _add_first_part(
    api: Api, lb_id: str, spec: PoolSpec, pool_id: str, additions: Sequence[Backend]
) -> Sequence[Backend]:
    """Add as many of `additions` as fit; a part answered 413 (the limit is lower than
    guessed) taught a lower limit and did nothing, so a smaller one is tried at once."""
    while True:
        members, count = first_part(spec, additions, api.body_limit.bytes or STOCK_BODY_LIMIT)
        try:
            api.add_members(lb_id, pool_id, members)
            return additions[:count]
        except BodyTooLarge:
            if count == 1:
                raise
