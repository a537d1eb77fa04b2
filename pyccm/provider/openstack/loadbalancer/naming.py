"""Names, descriptions and tags of everything pyccm creates for a Service (docs/migration.md#same).

They are upstream's, character for character, because they are how an existing cloud is
found again: an operator replacing the Go controller keeps their load balancers, and a
crashed sync finds what it created by name before creating anything (idempotence).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pyccm.protocol.views import Service

# OpenStack name fields hold at most 255 characters.
MAX_NAME = 255
SERVICE_PREFIX = "kube_service_"
# Upstream deletes a floating IP only when its description contains this text: it marks
# the addresses the controller allocated itself, never a user's.
FIP_MARKER = "Floating IP for Kubernetes external service"


def lb_name(service: Service, *, cluster: str) -> str:
    return f"{SERVICE_PREFIX}{cluster}_{service.namespace}_{service.name}"[:MAX_NAME]


def family_suffix(version: int) -> str:
    """What a dual-stack Service's second load balancer adds to its name: `_ipv6` (or
    `_ipv4` when IPv6 comes first). Kubernetes names hold no `_`, so no Service's own
    name ends like this."""
    return f"_ipv{version}"


def family_lb_name(name: str, version: int) -> str:
    """The load balancer of a dual-stack Service's second family: the first family's keeps
    upstream's name (`name`), so load balancers made by upstream are still found."""
    suffix = family_suffix(version)
    return name[: MAX_NAME - len(suffix)] + suffix


def legacy_lb_name(service: Service) -> str:
    """The name of load balancers created by old releases: "a" + the UID without dashes."""
    return ("a" + service.metadata.uid.replace("-", ""))[:32]


def child_name(kind: str, index: int, name: str) -> str:
    """`listener_<i>_<lb name>`, `pool_<i>_...`, `monitor_<i>_...` for Service port `i`."""
    return f"{kind}_{index}_{name}"[:MAX_NAME]


def lb_description(service: Service, *, cluster: str) -> str:
    return f"Kubernetes external service {service.namespace}/{service.name} from cluster {cluster}"


def fip_description(service: Service, *, cluster: str) -> str:
    return f"{FIP_MARKER} {service.namespace}/{service.name} from cluster {cluster}"


def security_group_name(service: Service) -> str:
    uid = service.metadata.uid
    return f"lb-sg-{uid}-{service.namespace}-{service.name}"[:MAX_NAME]


def security_group_description(service: Service, *, cluster: str) -> str:
    return (
        f"Security Group for {service.namespace}/{service.name} Service LoadBalancer "
        f"in cluster {cluster}"
    )


def is_service_tag(tag: str) -> bool:
    """A tag naming a Service that uses a (possibly shared) load balancer."""
    return tag.startswith(SERVICE_PREFIX)


# --- ownership by cluster identity (kubernetes/cloud-provider-openstack#3102) ---------------
# Names carry only `--cluster-name`, which two clusters may share; the cluster id (the
# `kube-system` namespace UID) is unique. It goes in a tag of every load balancer, floating
# IP and security group pyccm creates, and in the load balancer's description where Octavia
# has no tags (API < 2.5). Neutron and Octavia tags hold up to 255 characters, no commas.
OWNER_TAG_PREFIX = "pyccm-cluster:"
_OWNER_MARK = re.compile(r"\[" + re.escape(OWNER_TAG_PREFIX) + r"([^\]]+)\]")


def owner_tag(cluster_id: str) -> str:
    return f"{OWNER_TAG_PREFIX}{cluster_id}"


def owner_mark(cluster_id: str) -> str:
    """The description suffix that says who owns a load balancer when it cannot have tags."""
    return f" [{owner_tag(cluster_id)}]"


def owner_of(tags: Sequence[str], description: str = "") -> str | None:
    """The id of the cluster that owns a resource, from its tags or its description; None
    for an untagged one (created by upstream's controller, or before pyccm had ids)."""
    for tag in tags:
        if tag.startswith(OWNER_TAG_PREFIX):
            return tag.removeprefix(OWNER_TAG_PREFIX)
    found = _OWNER_MARK.search(description)
    return found.group(1) if found else None


def service_of_lb_name(name: str, *, cluster: str) -> str:
    """`namespace/name` of the Service a load balancer (or a Service tag) is named after, or
    "" when the name is not one of this cluster name's (Kubernetes names hold no `_`)."""
    prefix = f"{SERVICE_PREFIX}{cluster}_"
    if not name.startswith(prefix) or len(name) >= MAX_NAME:
        return ""
    namespace, _, rest = name.removeprefix(prefix).partition("_")
    # A dual-stack Service's second load balancer is still that Service's.
    rest = rest.removesuffix(family_suffix(6)).removesuffix(family_suffix(4))
    return f"{namespace}/{rest}" if namespace and rest else ""


def service_of_description(description: str) -> str:
    """`namespace/name` from upstream's floating-IP or load-balancer description."""
    found = re.search(r"(?:service|for) (\S+/\S+) ", description + " ")
    return found.group(1) if found else ""
