"""Tables, ids, address pools and the list-query rules the simulated services share.

Resources are stored as their wire representation (a JSON object per row, in insertion
order): the simulator's job is to round-trip what the real services send and accept, the
field lists in the reference are the contract, and a dict per row lets PUT bodies merge
without a translation layer. Typed helpers in each service module build the rows. The
one exception is load-balancer members, a million of them in a 5,000-node cloud: they
are compact structs kept with their pool (`members.py`).

A `Table` indexes the fields its kind is listed by, so a filtered list costs the rows it
matches, not the table; nothing a client sends costs more because unrelated rows exist.

Every table counts its creates, updates and deletes in one shared `Counters`, which is
what tests read to assert "exactly one load balancer was created for this Service".
"""

from __future__ import annotations

import ipaddress
import itertools
import random
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any, NewType

from multidict import MultiMapping

from pyccm_sim.openstack.errors import ApiError

Record = dict[str, Any]
ResourceId = NewType("ResourceId", str)

# Query parameters that steer a list instead of filtering it.
PAGING_PARAMS = frozenset({"limit", "marker", "sort_key", "sort_dir", "page_reverse", "fields"})
TAG_PARAMS = frozenset({"tags", "tags-any", "not-tags", "not-tags-any"})
# How a filter names a null field (`field_matches`).
NULL_SPELLINGS = frozenset({"", "None", "null"})


class Counters:
    """Per resource kind: how many were created, updated, deleted (never reset by deletes)."""

    def __init__(self) -> None:
        self._counts: dict[str, dict[str, int]] = {}

    def bump(self, kind: str, op: str) -> None:
        by_op = self._counts.get(kind)
        if by_op is None:
            by_op = self._counts[kind] = {"created": 0, "updated": 0, "deleted": 0}
        by_op[op] += 1

    def snapshot(self) -> dict[str, dict[str, int]]:
        return {kind: dict(by_op) for kind, by_op in self._counts.items()}

    def clear(self) -> None:
        self._counts.clear()


# RFC 4122 variant (10xx) and version 4 (0100) bits, as uuid.UUID(version=4) sets them.
VERSION_4_CLEAR = ~((0xC000 << 48) | (0xF000 << 64)) & ((1 << 128) - 1)
VERSION_4_SET = (0x8000 << 48) | (4 << 76)


class Ids:
    """Deterministic UUIDs and MACs from a seeded generator (same seed, same cloud)."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)
        self._series = ""
        self._serials = itertools.count()

    def serial(self) -> ResourceId:
        """A UUID of one series: its first 80 bits drawn once, its last 48 a count. Each is
        a distinct version-4 UUID, made for a third of `uuid`'s cost (a million members
        each need one)."""
        if not self._series:
            first = self.uuid()
            self._series = first[:24]
            self._serials = itertools.count(int(first[24:], 16))
        return ResourceId(f"{self._series}{next(self._serials) & 0xFFFFFFFFFFFF:012x}")

    def uuid(self) -> ResourceId:
        # What str(uuid.UUID(int=bits, version=4)) gives, without building the object
        # (a million members each need one).
        bits = self._rng.getrandbits(128) & VERSION_4_CLEAR | VERSION_4_SET
        text = f"{bits:032x}"
        return ResourceId(f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}")

    def hex(self) -> str:
        return uuid.UUID(int=self._rng.getrandbits(128), version=4).hex

    def mac(self) -> str:
        octets = [self._rng.randrange(256) for _ in range(3)]
        return "fa:16:3e:" + ":".join(f"{octet:02x}" for octet in octets)


class Table:
    """One resource kind's rows by id, counting every write in `counters`.

    `indexed` maps a list filter's query name to the row field it compares (`name` ->
    `name`, `loadbalancer_id` -> `_lb_id`); those fields get a hash index, so a filtered
    list starts from the rows with that value instead of every row of the kind.
    `also_indexed` fields are indexed for `with_value` only (their filter is parsed by the
    caller). Indexed fields must change only through `insert`, `touch` and `delete`.
    """

    def __init__(
        self,
        kind: str,
        counters: Counters,
        *,
        indexed: dict[str, str] | None = None,
        also_indexed: tuple[str, ...] = (),
    ) -> None:
        self.kind = kind
        self.rows: dict[str, Record] = {}
        self._counters = counters
        self._fields = dict(indexed or {})
        # field -> value -> ids of the rows holding it (a dict keeps insertion order).
        self._indexes: dict[str, dict[Any, dict[str, None]]] = {
            field: {} for field in (*self._fields.values(), *also_indexed)
        }

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[Record]:
        return iter(list(self.rows.values()))

    def insert(self, row: Record) -> Record:
        self.rows[row["id"]] = row
        self._index(row)
        self._counters.bump(self.kind, "created")
        return row

    def get(self, row_id: str) -> Record | None:
        return self.rows.get(row_id)

    def require(self, row_id: str, missing: Callable[[str], ApiError]) -> Record:
        row = self.rows.get(row_id)
        if row is None:
            raise missing(row_id)
        return row

    def touch(self, row: Record, changes: Record | None = None) -> Record:
        if changes:
            moved = [field for field in self._indexes if field in changes]
            self._unindex(row, moved)
            row.update(changes)
            self._index(row, moved)
        self._counters.bump(self.kind, "updated")
        return row

    def delete(self, row_id: str) -> Record | None:
        row = self.rows.pop(row_id, None)
        if row is not None:
            self._unindex(row, list(self._indexes))
            self._counters.bump(self.kind, "deleted")
        return row

    def with_value(self, field: str, value: Any) -> list[Record]:
        """The rows whose indexed `field` equals `value`, in insertion order."""
        ids = self._indexes[field].get(value, {})
        return [self.rows[row_id] for row_id in ids]

    def candidates(self, query: MultiMapping[str]) -> list[Record] | None:
        """The rows an indexed filter in `query` allows (a superset of the answer), or None
        when the query names no indexed filter and every row is a candidate."""
        ids = query.getall("id", [])
        best: list[Record] | None = (
            [self.rows[i] for i in dict.fromkeys(ids) if i in self.rows] if ids else None
        )
        for name, field in self._fields.items():
            values = query.getall(name, [])
            if not values:
                continue
            found: dict[str, Record] = {}
            for value in values:
                found.update((row["id"], row) for row in self.with_value(field, value))
                if value in NULL_SPELLINGS:
                    found.update((row["id"], row) for row in self.with_value(field, None))
            if best is None or len(found) < len(best):
                best = list(found.values())
        return best

    def _index(self, row: Record, fields: Iterable[str] | None = None) -> None:
        for field in self._indexes if fields is None else fields:
            for value in _index_values(row.get(field)):
                self._indexes[field].setdefault(value, {})[row["id"]] = None

    def _unindex(self, row: Record, fields: Iterable[str]) -> None:
        for field in fields:
            for value in _index_values(row.get(field)):
                ids = self._indexes[field].get(value)
                if ids is not None:
                    ids.pop(row["id"], None)
                    if not ids:
                        del self._indexes[field][value]


def _index_values(value: Any) -> list[Any]:
    """The index keys of a field: the value, or each item of a list (a list filter matches
    rows holding any wanted item, see `field_matches`)."""
    if isinstance(value, list | tuple):
        return [item for item in value if isinstance(item, str)]
    if isinstance(value, str | int | bool) or value is None:
        return [value]
    return []


class PoolExhausted(Exception):
    """No free address left in an allocation pool."""


class AddressPool:
    """Addresses of one subnet: which are used, and the lowest free one in the pool range."""

    def __init__(self, cidr: str, *, start: str, end: str) -> None:
        self.network = ipaddress.ip_network(cidr)
        self._start = int(ipaddress.ip_address(start))
        self._end = int(ipaddress.ip_address(end))
        self._used: set[int] = set()
        # Lowest address that might be free; allocation scans up from here.
        self._hint = self._start

    def contains(self, address: str) -> bool:
        try:
            return ipaddress.ip_address(address) in self.network
        except ValueError:
            return False

    def in_use(self, address: str) -> bool:
        return int(ipaddress.ip_address(address)) in self._used

    def claim(self, address: str) -> None:
        self._used.add(int(ipaddress.ip_address(address)))

    def allocate(self) -> str:
        candidate = self._hint
        while candidate <= self._end and candidate in self._used:
            candidate += 1
        if candidate > self._end:
            raise PoolExhausted(str(self.network))
        self._used.add(candidate)
        self._hint = candidate + 1
        return str(ipaddress.ip_address(candidate))

    def release(self, address: str) -> None:
        value = int(ipaddress.ip_address(address))
        self._used.discard(value)
        if self._start <= value < self._hint:
            self._hint = value


def now_iso() -> str:
    """Timestamps as Nova and Neutron print them (second precision, Z suffix)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def query_values(query: MultiMapping[str], name: str) -> list[str]:
    """All values of a repeatable parameter, splitting comma lists (tags=a,b)."""
    values: list[str] = []
    for raw in query.getall(name, []):
        values.extend(part for part in raw.split(",") if part)
    return values


def field_matches(value: Any, wanted: list[str]) -> bool:
    """Neutron/Octavia equality filters: any of the wanted values, compared as strings."""
    if isinstance(value, list):
        return any(str(item) in wanted for item in value)
    if isinstance(value, bool):
        return str(value).lower() in {item.lower() for item in wanted}
    if value is None:
        return any(item in NULL_SPELLINGS for item in wanted)
    return str(value) in wanted


def tags_match(tags: Iterable[str], query: MultiMapping[str]) -> bool:
    """The four tag filters of Neutron and Octavia (all / any / none-of-all / none)."""
    have = set(tags)
    all_of = query_values(query, "tags")
    any_of = query_values(query, "tags-any")
    not_all = query_values(query, "not-tags")
    not_any = query_values(query, "not-tags-any")
    if all_of and not set(all_of) <= have:
        return False
    if any_of and not have & set(any_of):
        return False
    if not_all and set(not_all) <= have:
        return False
    return not (not_any and have & set(not_any))


def select(
    rows: Iterable[Record], query: MultiMapping[str], *, handled: frozenset[str] = frozenset()
) -> list[Record]:
    """Rows matching every equality and tag filter in `query`.

    Parameters named in `handled` (filtered by the caller), paging parameters and names
    that are not fields of the resource are ignored, as the services do by default.
    """
    names = {name for name in query if name not in PAGING_PARAMS | handled}
    tag_names = names & TAG_PARAMS
    field_names = names - TAG_PARAMS
    wanted = {name: query.getall(name) for name in field_names}
    result = []
    for row in rows:
        if tag_names and not tags_match(row.get("tags", []), query):
            continue
        if all(
            name not in row or field_matches(row[name], values) for name, values in wanted.items()
        ):
            result.append(row)
    return result


def project_fields(rows: list[Record], query: MultiMapping[str]) -> list[Record]:
    """Only the `fields=` the client asked for (all of them when it asked for none)."""
    fields = query.getall("fields", [])
    if not fields:
        return rows
    keep = set(fields)
    return [{key: value for key, value in row.items() if key in keep} for row in rows]
