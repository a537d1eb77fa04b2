"""Bring an existing load balancer in line with its Service (docs/upstream.md#ensure).

Reads first (listeners, pools: two listings for the whole load balancer), then only the
writes that differ, so a Service whose load balancer is already right costs reads only.
Each write leaves the load balancer PENDING_UPDATE, so a sync makes at most one Octavia
write to it (`write`): a second would only earn Octavia's 409 (a whole member list
sent for nothing); `RetryAfter` ends the sync instead and the next one re-reads and
carries on. Every step is a comparison against the cloud's state, so repeating it after
a crash at any point does no harm.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TypeVar

from pyccm.provider.errors import CloudError, ProviderError, RetryAfter
from pyccm.provider.openstack.loadbalancer.api import (
    ENVELOPE,
    HEALTH_MONITORS,
    LISTENERS,
    MEMBERS,
    POOLS,
    Api,
    BodyTooLarge,
)
from pyccm.provider.openstack.loadbalancer.batch import JustWritten, Written, converge_in_parts
from pyccm.provider.openstack.loadbalancer.desired import ListenerSpec, PoolSpec
from pyccm.provider.openstack.loadbalancer.resources import Listener, Member, Pool
from pyccm.provider.openstack.loadbalancer.service_annotations import Events
from pyccm.provider.openstack.loadbalancer.service_config import ServiceConfig

T = TypeVar("T")


def _key(listener: Listener) -> tuple[str, int]:
    return (listener.protocol, listener.protocol_port)


class Reconciler:
    def __init__(
        self,
        *,
        api: Api,
        lb_id: str,
        cfg: ServiceConfig,
        events: Events,
        written: JustWritten | None = None,
        one_write: bool = True,
    ) -> None:
        self._api = api
        self._written = written or JustWritten()
        self._lb_id = lb_id
        self._cfg = cfg
        self._events = events
        self._wrote = False
        # False only for `plan`, whose writes are recorded, not sent: it goes on past the
        # first one so that the whole difference shows.
        self._one_write = one_write

    def write(self, action: Callable[[], T]) -> T:
        """Every Octavia write to this load balancer goes through here: after one that
        succeeded (it left the load balancer PENDING_UPDATE), the next raises `RetryAfter`
        instead of being sent. A failed write did nothing, so it does not count."""
        if self._wrote and self._one_write:
            raise self._api.retry_later(self._lb_id, "has more changes, once it is ACTIVE")
        result = action()
        self._wrote = True
        return result

    @property
    def wrote(self) -> bool:
        return self._wrote

    # --- whole Service (ensure) ------------------------------------------------------------------
    def listeners(
        self,
        specs: Sequence[ListenerSpec],
        *,
        owner: bool,
        current: Sequence[Listener] | None = None,
    ) -> None:
        """`current`: the load balancer's listeners when this sync has just read them."""
        if current is None:
            current = self._api.of_lb(LISTENERS, self._lb_id)
        self.check_conflicts(specs, current, owner=owner)
        wanted = {spec.key for spec in specs}
        pools = self._api.of_lb(POOLS, self._lb_id)
        # Leftovers go first: Octavia refuses two listeners on one port, so a protocol
        # change (TCP -> HTTP for X-Forwarded-For) needs the old one gone.
        for listener in current:
            if _key(listener) not in wanted and self._is_ours(listener, owner=owner):
                self._delete_listener(listener, pools)
        by_key = {_key(listener): listener for listener in current}
        for spec in specs:
            found = by_key.get(spec.key)
            if found is None:
                self._create_listener(spec)
                continue
            changes = spec.changes(found)
            if changes:
                self.write(
                    partial(self._api.update, LISTENERS, found.id, changes, lb_id=self._lb_id)
                )
            self.pool(spec, found, pools)

    def owned_listeners(self, *, owner: bool) -> list[Listener]:
        return [
            li for li in self._api.of_lb(LISTENERS, self._lb_id) if self._is_ours(li, owner=owner)
        ]

    def delete_listeners(self, listeners: Sequence[Listener]) -> None:
        pools = self._api.of_lb(POOLS, self._lb_id) if listeners else []
        for listener in listeners:
            self._delete_listener(listener, pools)

    # --- backends only (update) ------------------------------------------------------------------
    def backends(self, specs: Sequence[ListenerSpec]) -> None:
        by_key = {_key(li): li for li in self._api.of_lb(LISTENERS, self._lb_id)}
        pools = self._api.of_lb(POOLS, self._lb_id)
        for spec in specs:
            listener = by_key.get(spec.key)
            if listener is None:
                raise CloudError(
                    f"load balancer {self._lb_id} has no {spec.protocol} listener on port "
                    f"{spec.port}: the Service's ports changed, a full sync will add it"
                )
            self.pool(spec, listener, pools)

    # --- one listener's pool ---------------------------------------------------------------------
    def pool(self, spec: ListenerSpec, listener: Listener, pools: Sequence[Pool]) -> None:
        pool = _pool_of(listener, pools)
        if pool is None:
            self._create_pool(spec.pool, listener.id)
            return
        if pool.protocol != spec.pool.protocol:
            self.write(partial(self._api.delete, POOLS, pool.id, lb_id=self._lb_id))
            self._create_pool(spec.pool, listener.id)
            return
        self._update_pool(spec.pool, pool)
        self._members(spec.pool, pool)
        self._monitor(spec.pool, pool)

    def _update_pool(self, spec: PoolSpec, pool: Pool) -> None:
        changes = spec.changes(pool)
        if not changes:
            return
        try:
            self.write(partial(self._api.update, POOLS, pool.id, changes, lb_id=self._lb_id))
        except RetryAfter:
            raise
        except ProviderError as exc:
            # Upstream carries on with the old algorithm and says so.
            self._events.warn(
                "LoadBalancerLbMethodUnknown",
                f"failed to update pool {pool.name} ({', '.join(changes)}): {exc}",
            )

    def _members(self, spec: PoolSpec, pool: Pool) -> None:
        if self._cfg.serial:
            self._members_one_by_one(spec, pool)
            return
        written = self._written.take(pool.id, spec.members_print)
        if written is not None and written.left is not None:
            if len(written.left) == len(pool.members):
                # A split in progress: carry on from what its last call left.
                self._members_in_parts(spec, pool, written.left)
                return
            written = None  # changed meanwhile: read
        in_parts = self._known_too_large(spec)
        current: Sequence[Member] | None = None
        if len(pool.members) == spec.member_count:
            # Same count: read them to compare, unless this process just wrote them. A
            # different count is a change for sure, and saves the read.
            if not spec.member_count or written is not None:
                return
            if self._wrote and self._one_write:
                # Whatever the members say, no write could follow in this sync: read them
                # in the next one (at 5,000 members, 6 pages).
                raise self._api.retry_later(self._lb_id, "has more pools to compare")
            if in_parts:
                # A split works from the members themselves: one read serves both.
                current = self._members_of(pool)
                if len(current) == spec.member_count and all(spec.has(m) for m in current):
                    return
            elif self._api.members_match(pool.id, spec):
                return
        if not in_parts:
            try:
                whole = partial(self._api.replace_members, self._lb_id, pool.id, spec.member_list())
                self.write(whole)
                self._written.put(pool.id, Written(spec.members_print))
                return
            except BodyTooLarge:
                pass  # refused here or answered 413: nothing was done
        self._members_in_parts(spec, pool, self._members_of(pool) if current is None else current)

    def _known_too_large(self, spec: PoolSpec) -> bool:
        """Whether the whole member list is over the cloud's body limit, as learned from a
        413 (so the members go in parts)."""
        limit = self._api.body_limit.bytes
        return limit is not None and ENVELOPE + len(spec.member_list()) > limit

    def _members_in_parts(self, spec: PoolSpec, pool: Pool, current: Sequence[Member]) -> None:
        """One call of a split (`batch.py`); RetryAfter while more are needed."""
        left = self.write(
            partial(converge_in_parts, self._api, self._lb_id, spec, pool.id, current)
        )
        # The last call of a split leaves the spec's whole list, as one batch update would:
        # the next sync need not read it back either.
        self._written.put(pool.id, Written(spec.members_print, left))
        if left is not None:
            raise self._api.retry_later(
                self._lb_id, f"gets the members of pool {pool.name} in parts (body limit)"
            )

    def _members_of(self, pool: Pool) -> list[Member]:
        return self._api.find(MEMBERS, parent=pool.id) if pool.members else []

    def _members_one_by_one(self, spec: PoolSpec, pool: Pool) -> None:
        """`provider-requires-serial-api-calls`: one member per call, for providers without
        the batch update, one call per sync (the next one resumes)."""
        current = self._members_of(pool)
        have = {(m.name, m.address) for m in current if spec.has(m)}
        for backend in spec.backends if spec.member_port else ():
            if backend not in have:
                body = spec.member_body(backend)
                self.write(
                    partial(self._api.create, MEMBERS, body, lb_id=self._lb_id, parent=pool.id)
                )
        for existing in current:
            if not spec.has(existing):
                self.write(
                    partial(
                        self._api.delete, MEMBERS, existing.id, lb_id=self._lb_id, parent=pool.id
                    )
                )

    def _monitor(self, spec: PoolSpec, pool: Pool) -> None:
        wanted = spec.monitor
        if pool.healthmonitor_id is None:
            if wanted is not None:
                body = wanted.body() | {"pool_id": pool.id}
                self.write(partial(self._api.create, HEALTH_MONITORS, lb_id=self._lb_id, body=body))
            return
        if wanted is None:
            self.write(
                partial(self._api.delete, HEALTH_MONITORS, pool.healthmonitor_id, lb_id=self._lb_id)
            )
            return
        current = self._api.get_or_none(HEALTH_MONITORS, pool.healthmonitor_id)
        if current is None or current.type != wanted.type:
            if current is not None:
                self.write(
                    partial(self._api.delete, HEALTH_MONITORS, current.id, lb_id=self._lb_id)
                )
            self.write(
                partial(
                    self._api.create,
                    HEALTH_MONITORS,
                    lb_id=self._lb_id,
                    body=wanted.body() | {"pool_id": pool.id},
                )
            )
            return
        changes = wanted.changes(current)
        if changes:
            self.write(
                partial(self._api.update, HEALTH_MONITORS, current.id, changes, lb_id=self._lb_id)
            )

    # --- creation and deletion -------------------------------------------------------------------
    def _create_listener(self, spec: ListenerSpec) -> None:
        listener = self.write(
            partial(
                self._api.create,
                LISTENERS,
                lb_id=self._lb_id,
                body=spec.body() | {"loadbalancer_id": self._lb_id},
            )
        )
        self._create_pool(spec.pool, listener.id)

    def _create_pool(self, spec: PoolSpec, listener_id: str) -> None:
        # The pool alone, as upstream does: the members (one batch update) and the monitor
        # follow once the load balancer is ACTIVE again, in the next syncs, which find the
        # bare pool and fill it like any pool that differs from its spec.
        self.write(
            partial(
                self._api.create,
                POOLS,
                lb_id=self._lb_id,
                body=spec.body() | {"listener_id": listener_id},
            )
        )
        if self._one_write and (spec.member_count or spec.monitor is not None):
            # The create left the load balancer PENDING_UPDATE: the next write would only
            # earn a 409, so stop here.
            raise self._api.retry_later(self._lb_id, "got a new pool; its members come next")

    def _delete_listener(self, listener: Listener, pools: Sequence[Pool]) -> None:
        pool = _pool_of(listener, pools)
        if pool is not None:
            # Deleting a pool deletes its members and monitor with it.
            self.write(partial(self._api.delete, POOLS, pool.id, lb_id=self._lb_id))
        self.write(partial(self._api.delete, LISTENERS, listener.id, lb_id=self._lb_id))

    # --- ownership -------------------------------------------------------------------------------
    def _is_ours(self, listener: Listener, *, owner: bool) -> bool:
        """Tagged with this Service's name, or an untagged listener of its own LB."""
        return self._cfg.name in listener.tags or (owner and not listener.tags)

    def check_conflicts(
        self, specs: Sequence[ListenerSpec], current: Sequence[Listener], *, owner: bool
    ) -> None:
        """Refuses a port another Service's listener already serves (upstream's wording)."""
        wanted = {spec.key for spec in specs}
        for listener in current:
            if _key(listener) in wanted and not self._is_ours(listener, owner=owner):
                raise CloudError(
                    f"the listener port {listener.protocol_port} already exists on load "
                    f"balancer {self._lb_id} (used by another Service)",
                    retryable=False,
                )


def _pool_of(listener: Listener, pools: Sequence[Pool]) -> Pool | None:
    for pool in pools:
        if pool.id == listener.default_pool_id or any(r.id == listener.id for r in pool.listeners):
            return pool
    return None
