"""What this cluster owns in the cloud, for `pyccm gc` and the orphan scan
(kubernetes/cloud-provider-openstack#3145).

Ownership is the cluster id in a resource's tags (`naming.owner_tag`), or in a load
balancer's description where Octavia has no tags: listings filter by it on the server, so
nothing another cluster owns (or nobody owns) is ever listed, let alone deleted. Each
resource comes with the Services it was made for, read from its name, tags or description;
which of them are orphans is for the caller to say, who knows the live Services.

Deletion checks the owner again on a fresh read, and goes one write at a time: a load
balancer busy with the previous write answers `RetryAfter`, and the caller calls again.
"""

from __future__ import annotations

from pyccm.provider.errors import CloudError
from pyccm.provider.interface import OwnedResource
from pyccm.provider.openstack.loadbalancer import naming
from pyccm.provider.openstack.loadbalancer.api import (
    ACTIVE,
    FLOATING_IPS,
    LISTENERS,
    LOADBALANCERS,
    PENDING_DELETE,
    POOLS,
    PORTS,
    SECURITY_GROUPS,
    Api,
    is_pending,
)
from pyccm.provider.openstack.loadbalancer.floating import FloatingIps
from pyccm.provider.openstack.loadbalancer.resources import Listener, LoadBalancer
from pyccm.provider.openstack.loadbalancer.security_groups import SecurityGroups

SG_PREFIX = "lb-sg-"
UID_LENGTH = 36


class Inventory:
    def __init__(
        self,
        *,
        api: Api,
        cluster: str,
        cluster_id: str,
        tags: bool,
        floating_ips: FloatingIps,
        security_groups: SecurityGroups,
    ) -> None:
        self._api = api
        self._cluster = cluster
        self._id = cluster_id
        self._tag = naming.owner_tag(cluster_id)
        self._tags = tags  # Octavia has tags (API 2.5); else ownership is in descriptions
        self._fips = floating_ips
        self._groups = security_groups

    # --- listing ---------------------------------------------------------------------------------
    def owned(self) -> tuple[OwnedResource, ...]:
        found: list[OwnedResource] = []
        for lb in self._lbs():
            found.append(self._lb(lb))
            found.extend(self._shared_listeners(lb))
        for fip in self._api.find(FLOATING_IPS, {"tags": self._tag}):
            service = naming.service_of_description(fip.description)
            found.append(
                OwnedResource(
                    kind="floating IP",
                    id=fip.id,
                    name=fip.floating_ip_address,
                    services=(service,) if service else (),
                    detail=f"port {fip.port_id}" if fip.port_id else "not attached",
                )
            )
        for group in self._api.find(SECURITY_GROUPS, {"tags": self._tag}):
            service = naming.service_of_description(group.description)
            found.append(
                OwnedResource(
                    kind="security group",
                    id=group.id,
                    name=group.name,
                    services=(service,) if service else (),
                    service_uid=_uid_of_group(group.name),
                )
            )
        return tuple(found)

    def _lbs(self) -> list[LoadBalancer]:
        if self._tags:
            return self._api.find(LOADBALANCERS, {"tags": self._tag})
        mark = naming.owner_mark(self._id)
        return [lb for lb in self._api.find(LOADBALANCERS) if mark in lb.description]

    def _lb(self, lb: LoadBalancer) -> OwnedResource:
        names = [lb.name, *(t for t in lb.tags if naming.is_service_tag(t))]
        services = tuple(
            dict.fromkeys(
                s for n in names if (s := naming.service_of_lb_name(n, cluster=self._cluster))
            )
        )
        legacy = lb.name[1:] if len(lb.name) == 33 and lb.name.startswith("a") else ""
        return OwnedResource(
            kind="load balancer",
            id=lb.id,
            name=lb.name,
            services=services,
            service_uid=legacy,
            detail=lb.provisioning_status,
        )

    def _shared_listeners(self, lb: LoadBalancer) -> list[OwnedResource]:
        """Listeners of the Services that joined this cluster's load balancer: each one
        carries its Service's name as a tag."""
        if not any(naming.is_service_tag(t) and t != lb.name for t in lb.tags):
            return []
        found = []
        for listener in self._api.of_lb(LISTENERS, lb.id):
            tags = [t for t in listener.tags if naming.is_service_tag(t) and t != lb.name]
            services = tuple(
                s for t in tags if (s := naming.service_of_lb_name(t, cluster=self._cluster))
            )
            if services:
                found.append(
                    OwnedResource(
                        kind="listener",
                        id=listener.id,
                        name=listener.name,
                        services=services,
                        parent=lb.id,
                        detail=f"{listener.protocol}/{listener.protocol_port}",
                    )
                )
        return found

    # --- deleting --------------------------------------------------------------------------------
    def delete(self, resource: OwnedResource) -> None:
        match resource.kind:
            case "load balancer":
                self._delete_lb(resource.id)
            case "listener":
                self._delete_listener(resource)
            case "floating IP":
                self._delete_fip(resource.id)
            case "security group":
                self._delete_group(resource.id)
            case _:
                raise CloudError(
                    f"{resource.kind} is not a load-balancer resource", retryable=False
                )

    def _mine(self, lb: LoadBalancer) -> LoadBalancer:
        if naming.owner_of(lb.tags, lb.description) != self._id:
            raise CloudError(
                f"load balancer {lb.id} is not this cluster's any more: left alone", retryable=False
            )
        return lb

    def _active(self, lb_id: str) -> LoadBalancer | None:
        lb = self._api.get_or_none(LOADBALANCERS, lb_id)
        if lb is None or lb.provisioning_status == "DELETED":
            return None
        if lb.provisioning_status == PENDING_DELETE:
            raise self._api.retry_later(lb.id, "is being deleted")
        if is_pending(lb):
            raise self._api.retry_later(lb.id, f"is {lb.provisioning_status}")
        return lb

    def _delete_lb(self, lb_id: str) -> None:
        lb = self._api.get_or_none(LOADBALANCERS, lb_id)
        if lb is None or lb.provisioning_status == "DELETED":
            return
        self._mine(lb)
        if lb.provisioning_status == PENDING_DELETE:
            raise self._api.retry_later(lb.id, "is being deleted")
        if is_pending(lb):
            raise self._api.retry_later(lb.id, f"is {lb.provisioning_status}")
        # The floating IPs pyccm allocated for it go with it, as in a Service's deletion.
        self._fips.delete_ours(lb)
        self._api.delete(LOADBALANCERS, lb.id, lb_id=lb.id, params={"cascade": "true"})
        raise self._api.retry_later(lb.id, "is being deleted")

    def _delete_listener(self, resource: OwnedResource) -> None:
        """Its pool, then the listener, then its Service's tag on the load balancer: one
        write per call, since each leaves the load balancer busy."""
        lb = self._active(resource.parent)
        if lb is None:
            return
        self._mine(lb)
        listener = _find(self._api.of_lb(LISTENERS, lb.id), resource.id)
        if listener is not None:
            for pool in self._api.of_lb(POOLS, lb.id):
                if pool.id == listener.default_pool_id:
                    self._api.delete(POOLS, pool.id, lb_id=lb.id)
                    raise self._api.retry_later(lb.id, "lost a pool; its listener is next")
            self._api.delete(LISTENERS, listener.id, lb_id=lb.id)
            raise self._api.retry_later(lb.id, "lost a listener; its Service's tag is next")
        names = {
            f"{naming.SERVICE_PREFIX}{self._cluster}_{s.replace('/', '_')}"
            for s in resource.services
        }
        if lb.provisioning_status == ACTIVE and names & set(lb.tags):
            self._api.update(
                LOADBALANCERS, lb.id, {"tags": [t for t in lb.tags if t not in names]}, lb_id=lb.id
            )

    def _delete_fip(self, fip_id: str) -> None:
        for fip in self._api.find(FLOATING_IPS, {"id": fip_id}):
            if naming.owner_of(fip.tags) != self._id:
                raise CloudError(
                    f"floating IP {fip_id} is not this cluster's any more", retryable=False
                )
            self._api.delete(FLOATING_IPS, fip.id)

    def _delete_group(self, group_id: str) -> None:
        for group in self._api.find(SECURITY_GROUPS, {"id": group_id}):
            if naming.owner_of(group.tags) != self._id:
                raise CloudError(
                    f"security group {group_id} is not this cluster's any more", retryable=False
                )
            for port in self._api.ports({"security_groups": group.id}):
                kept = [g for g in port.security_groups if g != group.id]
                self._api.update(PORTS, port.id, {"security_groups": kept})
            self._api.delete(SECURITY_GROUPS, group.id)


def _find(listeners: list[Listener], listener_id: str) -> Listener | None:
    return next((li for li in listeners if li.id == listener_id), None)


def _uid_of_group(name: str) -> str:
    """The Service UID in `lb-sg-<uid>-<namespace>-<name>`."""
    rest = name.removeprefix(SG_PREFIX)
    return rest[:UID_LENGTH] if name.startswith(SG_PREFIX) and len(rest) > UID_LENGTH else ""
