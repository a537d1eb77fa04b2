"""Node views as the manager's watch delivers them, built in one place.

`node("n1")` is a bare node (uid `uid-n1`, resourceVersion 1); keywords add what a test
needs: a providerID, addresses, a Ready condition, labels, taints, pod CIDRs, a deletion
timestamp.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyccm.protocol.views import (
    Node,
    NodeAddress,
    NodeCondition,
    NodeSpec,
    NodeStatus,
    OwnerMeta,
    Taint,
)

DELETED_AT = "2026-11-21T00:00:00Z"


def node(
    name: str,
    rv: int | str = 1,
    provider_id: str = "",
    *,
    addresses: Iterable[tuple[str, str]] = (),
    internal_ips: Iterable[str] = (),
    ready: str | None = None,
    conditions: Iterable[NodeCondition] = (),
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    taints: Iterable[Taint] = (),
    pod_cidrs: Iterable[str] = (),
    deleting: bool = False,
) -> Node:
    """A Node. `internal_ips` come first as InternalIP addresses, then `addresses`
    ((type, address) pairs); `ready` adds a Ready condition with that status before
    `conditions`; the first of `pod_cidrs` is also `podCIDR`."""
    cidrs = tuple(pod_cidrs)
    ready_condition = () if ready is None else (NodeCondition(type="Ready", status=ready),)
    return Node(
        metadata=OwnerMeta(
            name=name,
            uid=f"uid-{name}",
            resource_version=str(rv),
            labels=labels or {},
            annotations=annotations or {},
            deletion_timestamp=DELETED_AT if deleting else None,
        ),
        spec=NodeSpec(
            provider_id=provider_id,
            pod_cidrs=cidrs,
            pod_cidr=cidrs[0] if cidrs else "",
            taints=tuple(taints),
        ),
        status=NodeStatus(
            addresses=(
                *(NodeAddress(type="InternalIP", address=ip) for ip in internal_ips),
                *(NodeAddress(type=kind, address=address) for kind, address in addresses),
            ),
            conditions=(*ready_condition, *conditions),
        ),
    )
