"""Which nodes become pool members, at which address (docs/upstream.md#octavia-objects).

A node is a member when it passes the Service's node selector and has an address of the
Service's IP family: its first InternalIP, else its first ExternalIP (upstream's order).
With `node-address-type`, only an address of that type; with `member-subnet-id`
configured, only an address in that subnet's CIDR, so a node with several interfaces is
a member on the member subnet's. Nodes without one are skipped; those that have addresses
of the family but none that fits are named in a Warning (`MemberChoice`, `Members`).

Every LB Service of a cluster gets the same backend node set, so the (name, address)
list is computed once per node set, selector and IP family (`Backends`), not once per
Service and port: at 5,000 nodes that is ~50 ms of address parsing per Service saved.
"""

from __future__ import annotations

import functools
import ipaddress
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from pyccm.protocol.views import Node
from pyccm.provider.interface import NodeSelector, selects

Selector = NodeSelector
# A member-to-be: the node's name and the address its pool members get.
Backend = tuple[str, str]
# The node sets the service controller hands over change rarely (a node joins or leaves)
# and every Service of a sync round shares one: a few entries are plenty.
CACHED_NODE_SETS = 8


def parse_selector(text: str) -> Selector:
    """`k=v, k2, k3=` → ((k, v), (k2, None), (k3, None)): a key without a value, or with
    an empty one, means "label exists" (upstream's rule)."""
    terms: list[tuple[str, str | None]] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, _, value = part.partition("=")
        if key.strip():
            terms.append((key.strip(), value.strip() or None))
    return tuple(terms)


def node_matches(node: Node, selector: Selector) -> bool:
    return selects(selector, node.metadata.labels)


@functools.lru_cache(maxsize=65536)
def address_version(address: str) -> int | None:
    # Cached: node addresses repeat on every sync, and parsing one costs ~3 µs.
    try:
        return ipaddress.ip_address(address).version
    except ValueError:
        return None


# The node address types a member may have, in upstream's order.
ADDRESS_TYPES = ("InternalIP", "ExternalIP")


@dataclass(frozen=True)
class MemberChoice:
    """Which of a node's addresses of one IP family becomes its pool member."""

    version: int
    # `node-address-type`: only addresses of this type; "" is upstream's order, the first
    # InternalIP, else the first ExternalIP.
    address_type: str = ""
    # The member subnet's CIDR when `member-subnet-id` is configured: only an address in
    # it (a node with several interfaces has others, which Octavia could not reach there).
    cidr: str = ""

    @property
    def strict(self) -> bool:
        """Whether a node with addresses of this family can still have none that fits."""
        return bool(self.address_type or self.cidr)

    def describe(self) -> str:
        kinds = self.address_type or " or ".join(ADDRESS_TYPES)
        where = f" in the member subnet {self.cidr}" if self.cidr else ""
        return f"IPv{self.version} {kinds} address{where}"


@functools.lru_cache(maxsize=64)
def _network(cidr: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_network(cidr, strict=False)


def member_address(node: Node, choice: MemberChoice) -> str:
    """The node's first address that `choice` allows, by type in its order; "" when none."""
    network = _network(choice.cidr) if choice.cidr else None
    for kind in (choice.address_type,) if choice.address_type else ADDRESS_TYPES:
        for entry in node.status.addresses:
            if entry.type != kind or address_version(entry.address) != choice.version:
                continue
            if network is None or ipaddress.ip_address(entry.address) in network:
                return entry.address
    return ""


def _has_family(node: Node, version: int) -> bool:
    return any(address_version(entry.address) == version for entry in node.status.addresses)


@dataclass(frozen=True)
class Members:
    """The nodes that become members, in the order given, with their member address; and
    the nodes left out because none of their addresses of the family fits the choice
    (a node with no address of the family at all is left out silently, as upstream does:
    a single-stack node of a dual-stack cluster)."""

    backends: tuple[Backend, ...]
    left_out: tuple[str, ...] = ()


def member_backends(nodes: Sequence[Node], selector: Selector, choice: MemberChoice) -> Members:
    found: list[Backend] = []
    left_out: list[str] = []
    for node in nodes:
        if selector and not node_matches(node, selector):
            continue
        address = member_address(node, choice)
        if address:
            found.append((node.name, address))
        elif choice.strict and _has_family(node, choice.version):
            left_out.append(node.name)
    return Members(tuple(found), tuple(left_out))


class Backends:
    """`member_backends`, remembered for the last few node sets. Only tuples are remembered,
    by identity: the service controller passes the same tuple to every Service until the
    node set changes, and a tuple cannot change behind the cache's back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (id of the node sequence, selector, choice) -> (the sequence, its members).
        # The sequence is held so that its id cannot be reused by another object.
        self._cache: dict[tuple[int, Selector, MemberChoice], tuple[Sequence[Node], Members]]
        self._cache = {}

    def of(self, nodes: Sequence[Node], selector: Selector, choice: MemberChoice) -> Members:
        if not isinstance(nodes, tuple):
            return member_backends(nodes, selector, choice)
        key = (id(nodes), selector, choice)
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and hit[0] is nodes:
            return hit[1]
        members = member_backends(nodes, selector, choice)
        with self._lock:
            if len(self._cache) >= CACHED_NODE_SETS:
                del self._cache[next(iter(self._cache))]  # the oldest entry
            self._cache[key] = (nodes, members)
        return members
