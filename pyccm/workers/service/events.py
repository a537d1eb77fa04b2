"""The service controller's Events, with upstream's reasons and wordings, and how an error
becomes one (secret-free: a provider's own message, or an unexpected error's type only)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pyccm.protocol.messages import Action, RecordEvent
from pyccm.protocol.views import Node, Service
from pyccm.provider.errors import OwnedByAnotherCluster, ProviderError
from pyccm.provider.interface import ProviderEvent
from pyccm.workers.runtime.controller import SyncFailed, service_ref

log = logging.getLogger(__name__)

COMPONENT = "service-controller"
# Upstream lists at most this many node names in an event.
EVENT_NODE_NAMES = 20


def event(service: Service, reason: str, message: str, *, warning: bool = False) -> RecordEvent:
    return RecordEvent(
        regarding=service_ref(service),
        reason=reason,
        message=message,
        type="Warning" if warning else "Normal",
        component=COMPONENT,
    )


def no_nodes(service: Service) -> RecordEvent:
    return event(
        service,
        "UnAvailableLoadBalancer",
        "There are no available nodes for LoadBalancer",
        warning=True,
    )


def deleted(service: Service) -> RecordEvent:
    return event(service, "DeletedLoadBalancer", "Deleted load balancer")


def from_provider(service: Service, events: Sequence[ProviderEvent]) -> list[Action]:
    return [event(service, e.reason, e.message, warning=e.type == "Warning") for e in events]


def node_names(nodes: Sequence[Node]) -> str:
    """Upstream's list: at most 20 names, then `<N more>`, then the total."""
    names = [n.name for n in nodes[:EVENT_NODE_NAMES]]
    if len(nodes) > EVENT_NODE_NAMES:
        names.append(f"<{len(nodes) - EVENT_NODE_NAMES} more>")
    return f"[{', '.join(names)}] (total {len(nodes)})"


def describe(error: Exception) -> str:
    """The provider's own messages are built secret-free; anything else (a library's bug, a
    surprise response) is named by its type only, with the traceback in this worker's log."""
    if isinstance(error, ProviderError):
        return str(error)
    log.error("unexpected error in a load-balancer sync", exc_info=error)
    return f"unexpected {type(error).__name__} (the service worker's log has the details)"


def sync_failure_reason(error: Exception) -> str:
    """Upstream's `SyncLoadBalancerFailed`, except for a load balancer another cluster owns
    (kubernetes/cloud-provider-openstack#3102), whose Warning has a reason of its own and
    names that cluster."""
    if isinstance(error, OwnedByAnotherCluster):
        return error.reason
    return "SyncLoadBalancerFailed"


def failed(
    service: Service,
    message: str,
    *,
    actions: Sequence[Action] = (),
    reason: str = "SyncLoadBalancerFailed",
) -> SyncFailed:
    warning = event(service, reason, f"Error syncing load balancer: {message}", warning=True)
    return SyncFailed(message, actions=(*actions, warning))
