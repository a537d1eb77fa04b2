"""Names, descriptions and tags of everything pyccm creates for a Service (reference §3.1).

They are upstream's, character for character, because they are how an existing cloud is
found again: an operator replacing the Go controller keeps their load balancers, and a
crashed sync finds what it created by name before creating anything (idempotence).
"""

from __future__ import annotations

from pyccm.protocol.views import Service

# OpenStack name fields hold at most 255 characters.
MAX_NAME = 255
SERVICE_PREFIX = "kube_service_"
# Upstream deletes a floating IP only when its description contains this text: it marks
# the addresses the controller allocated itself, never a user's.
FIP_MARKER = "Floating IP for Kubernetes external service"


def lb_name(service: Service, *, cluster: str) -> str:
    return f"{SERVICE_PREFIX}{cluster}_{service.namespace}_{service.name}"[:MAX_NAME]


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
