"""Load-balancer members, stored compactly: a large cloud holds a million of them.

200 load balancers with every one of 5,000 nodes in their pool is 1,000,000 members. As
one wire-shaped dict each (what the other kinds are) they took well over a gigabyte and
made every cyclic garbage collection walk them; here each is a `Member` struct without
GC tracking, whose repeated strings (address, node name, subnet, timestamp) are shared,
rendered to the wire shape only when a response holds it.

Members live with their pool (`PoolMembers`), never in one global table: nothing in
Octavia's API reaches a member except through its pool, so no request ever pays for the
members of other pools. A pool keeps them by id and, for paging, in Octavia's
`created_at, id` order, re-sorted only after its membership changed.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Annotated, Any

import msgspec

from pyccm_sim.openstack.store import Counters

# Fields a client can set on an existing member through a batch update (Octavia compares
# them to decide whether the member changed).
BATCH_FIELDS = (
    "name",
    "weight",
    "backup",
    "monitor_address",
    "monitor_port",
    "admin_state_up",
    "subnet_id",
    "tags",
)
_INTS: dict[int, int] = {}
MAX_STRING = 255  # WSME's StringType(max_length=255): a name, a tag
Port = Annotated[int, msgspec.Meta(ge=1, le=65535)]


class MemberBody(msgspec.Struct, forbid_unknown_fields=True):
    """A member body as a CCM writes it, typed so that msgspec checks a whole pool's list
    in one call (`Octavia.distinct_members`). It accepts a subset of what Octavia does: a
    body it refuses (a wrong type, a number out of range, an unknown field) goes through
    the field-by-field check, which accepts what Octavia accepts and words its errors."""

    address: str
    protocol_port: Port
    name: Annotated[str, msgspec.Meta(max_length=MAX_STRING)] | None = None
    subnet_id: str | None = None
    weight: Annotated[int, msgspec.Meta(ge=0, le=256)] | None = None
    backup: bool | None = None
    monitor_address: str | None = None
    monitor_port: Port | None = None
    admin_state_up: bool | None = None
    tags: list[Annotated[str, msgspec.Meta(max_length=MAX_STRING)]] | None = None
    project_id: Any = None
    tenant_id: Any = None


class Member(msgspec.Struct, gc=False):
    """One member; holds only strings, numbers and a tuple, so GC never needs to see it."""

    id: str
    name: str
    address: str
    protocol_port: int
    subnet_id: str | None
    weight: int
    backup: bool
    monitor_address: str | None
    monitor_port: int | None
    admin_state_up: bool
    tags: tuple[str, ...]
    provisioning_status: str
    created_at: str
    updated_at: str | None
    pool_id: str
    lb_id: str

    def order_key(self) -> tuple[str, str]:
        return (self.created_at, self.id)

    def wire(self, operating_status: str, project_id: str) -> MemberView:
        """The member as Octavia renders it."""
        return MemberView(
            self.id,
            self.name,
            self.admin_state_up,
            project_id,
            project_id,
            list(self.tags),
            self.provisioning_status,
            operating_status,
            self.created_at,
            self.updated_at,
            self.address,
            self.protocol_port,
            self.subnet_id,
            self.weight,
            self.backup,
            self.monitor_address,
            self.monitor_port,
        )


class MemberView(msgspec.Struct, gc=False):
    """A member as Octavia's API renders it, in its field order: a pool's thousands are
    encoded straight from these, without a dict each (`msgspec.structs.asdict` gives the
    dict where a filter or a test needs one)."""

    id: str
    name: str
    admin_state_up: bool
    project_id: str
    tenant_id: str
    tags: list[str]
    provisioning_status: str
    operating_status: str
    created_at: str
    updated_at: str | None
    address: str
    protocol_port: int
    subnet_id: str | None
    weight: int
    backup: bool
    monitor_address: str | None
    monitor_port: int | None
    vnic_type: str = "normal"


def shared(value: Any) -> Any:
    """One object per distinct string or number, so a million members share them."""
    if isinstance(value, str):
        return sys.intern(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return _INTS.setdefault(value, value)
    return value


class PoolMembers:
    """One pool's members by id (insertion order), and in `created_at, id` order."""

    __slots__ = ("_ordered", "by_id")

    def __init__(self) -> None:
        self.by_id: dict[str, Member] = {}
        self._ordered: list[Member] | None = None

    def __len__(self) -> int:
        return len(self.by_id)

    def __iter__(self) -> Iterator[Member]:
        return iter(list(self.by_id.values()))

    def ids(self) -> list[str]:
        return list(self.by_id)

    def add(self, member: Member) -> None:
        self.by_id[member.id] = member
        self._ordered = None

    def discard(self, member: Member) -> bool:
        """Remove `member` if it is still this pool's; whether it was."""
        if self.by_id.get(member.id) is not member:
            return False
        del self.by_id[member.id]
        self._ordered = None
        return True

    def ordered(self) -> list[Member]:
        if self._ordered is None:
            self._ordered = sorted(self.by_id.values(), key=Member.order_key)
        return self._ordered


class MemberTable:
    """Every pool's members: counts writes like a `Table`, answers inventory and snapshots."""

    kind = "member"

    def __init__(self, counters: Counters) -> None:
        self._counters = counters
        self._pools: dict[str, PoolMembers] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Member]:
        for members in list(self._pools.values()):
            yield from members

    def attach(self, pool_id: str, members: PoolMembers) -> None:
        """A new pool's (empty) member set joins the table."""
        self._pools[pool_id] = members

    def insert(self, member: Member) -> Member:
        self._pools[member.pool_id].add(member)
        self._count += 1
        self._counters.bump(self.kind, "created")
        return member

    def touch(self, member: Member, changes: dict[str, Any]) -> Member:
        for name, value in changes.items():
            setattr(member, name, shared(value))
        self._counters.bump(self.kind, "updated")
        return member

    def delete(self, member: Member) -> None:
        members = self._pools.get(member.pool_id)
        if members is not None and members.discard(member):
            self._count -= 1
            self._counters.bump(self.kind, "deleted")

    def drop_pool(self, pool_id: str) -> None:
        """Delete every member of a pool that is going away."""
        members = self._pools.get(pool_id)
        if members is None:
            return
        for member in members:
            self.delete(member)
        del self._pools[pool_id]
