"""Which nodes become pool members, at which address (reference §3.4 step 9, §3.5).

A node is a member when it passes the Service's node selector and has an address of the
Service's IP family: its first InternalIP, else its first ExternalIP. Nodes without one
are skipped (upstream logs a warning; the member set simply does not include them).
"""

from __future__ import annotations

import ipaddress

from protocol.views import Node

Selector = tuple[tuple[str, str | None], ...]


def parse_selector(text: str) -> Selector:
    """`k=v, k2` → ((k, v), (k2, None)); a key without a value means "label exists"."""
    terms: list[tuple[str, str | None]] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if key.strip():
            terms.append((key.strip(), value.strip() if sep else None))
    return tuple(terms)


def node_matches(node: Node, selector: Selector) -> bool:
    labels = node.metadata.labels
    return all(
        key in labels and (value is None or value == "" or labels[key] == value)
        for key, value in selector
    )


def _version(address: str) -> int | None:
    try:
        return ipaddress.ip_address(address).version
    except ValueError:
        return None


def member_address(node: Node, version: int) -> str:
    """The node's first InternalIP of `version`, else its first ExternalIP; "" when none."""
    for kind in ("InternalIP", "ExternalIP"):
        for entry in node.status.addresses:
            if entry.type == kind and _version(entry.address) == version:
                return entry.address
    return ""
