"""The Octavia and Neutron REST calls of the load-balancer code, one method per call.

Each method is one HTTP request through the process's `OpenStackClient` (throttled,
measured as `<resource>_<op>`, errors mapped), so the call sequence of a sync reads like
the reference's §3.14 and can be compared with upstream's call for call. openstacksdk has
no method for the batch member update; here it is a plain `PUT /lbaas/pools/{id}/members`.

Request bodies have a size limit (oslo.middleware's `max_request_body_size`, 114,688 bytes
by default, answered 413 before anything is done). `BodyLimit` learns it from the first 413
so that later bodies over it are refused here (`BodyTooLarge`) without a call; the callers
split what they send (`batch.py`, and the member-less create in `octavia.py`).

Octavia answers 409 to any write while the load balancer is PENDING_*, in two wordings:
"Load Balancer <id> is immutable and cannot be updated." for a child (listener, pool,
member, monitor) and "Invalid state PENDING_UPDATE of loadbalancer resource <id>" for a
PUT or DELETE of the load balancer itself. `write` turns both into `RetryAfter` (upstream
would have blocked a thread polling for ACTIVE), so a sync stops where it is and the next
one carries on from the cloud's state. Any other 409 (a duplicate listener port, ...) is a
real conflict and fails the sync.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import msgspec

from pyccm.protocol.decoding import decode_json
from pyccm.provider.errors import CloudConflict, CloudError, CloudNotFound, RetryAfter
from pyccm.provider.openstack.client import OpenStackClient
from pyccm.provider.openstack.loadbalancer.resources import (
    FloatingIp,
    FloatingIpEnvelope,
    HealthMonitor,
    HealthMonitorEnvelope,
    Listener,
    ListenerEnvelope,
    LoadBalancer,
    LoadBalancerEnvelope,
    Member,
    Pool,
    PoolEnvelope,
    Ref,
    SecurityGroup,
    SecurityGroupEnvelope,
    SecurityGroupRule,
    Subnet,
    SubnetEnvelope,
)
from pyccm.provider.openstack.resources import Network, Port

log = logging.getLogger(__name__)

Body = dict[str, Any]
T = TypeVar("T")
ACTIVE = "ACTIVE"
ERROR = "ERROR"
PENDING_DELETE = "PENDING_DELETE"
# Waiting for ACTIVE without holding a thread: the first retry comes after 1 s (upstream's
# first poll), then 1.5x per try up to 30 s, so a 60 s amphora boot costs ~9 cheap GETs.
FIRST_RETRY = 1.0
RETRY_FACTOR = 1.5
MAX_RETRY = 30.0
# oslo.middleware's default `max_request_body_size` (Octavia's and Neutron's stock limit).
STOCK_BODY_LIMIT = 114_688


_BUSY = re.compile(r"is immutable|Invalid state PENDING_")


def is_busy(conflict: CloudConflict) -> bool:
    """A 409 that only means "the load balancer is PENDING_*, try again later"."""
    return _BUSY.search(str(conflict)) is not None


def is_pending(lb: LoadBalancer) -> bool:
    return lb.provisioning_status.startswith("PENDING")


class PendingBackoff:
    """Per load balancer: how many syncs in a row found it PENDING_*, as a growing delay."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tries: dict[str, int] = {}

    def retry(self, lb_id: str, why: str) -> RetryAfter:
        with self._lock:
            tries = self._tries.get(lb_id, 0)
            self._tries[lb_id] = tries + 1
        delay = min(MAX_RETRY, FIRST_RETRY * RETRY_FACTOR**tries)
        return RetryAfter(f"load balancer {lb_id} {why}; retrying in {delay:.1f}s", delay=delay)

    def clear(self, lb_id: str) -> None:
        with self._lock:
            self._tries.pop(lb_id, None)


class BodyTooLarge(CloudError):
    """A request body over the cloud's limit: answered 413, or refused here because an
    earlier 413 taught the limit. Nothing was done; the caller sends less per call."""

    def __init__(self, message: str, *, size: int) -> None:
        super().__init__(message, status=413, retryable=False)
        self.size = size


class BodyLimit:
    """The largest request body the cloud takes, as learned from its 413s (None: no 413
    seen yet, so anything is tried). Process-wide; a raised limit is seen after a restart."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._limit: int | None = None

    @property
    def bytes(self) -> int | None:
        with self._lock:
            return self._limit

    def refused(self, size: int) -> None:
        """A body of `size` bytes got 413: assume the stock limit, or half of `size` when
        that was already under it, so that the next split fits."""
        guess = STOCK_BODY_LIMIT if size > STOCK_BODY_LIMIT else size // 2
        with self._lock:
            if self._limit is None or guess < self._limit:
                log.warning(
                    "the cloud refused a %d-byte request body (413): sending at most %d bytes "
                    "per call from now on (raise [oslo_middleware] max_request_body_size)",
                    size,
                    guess,
                )
                self._limit = guess

    def check(self, body: Body, request: str) -> None:
        """Raise `BodyTooLarge` when `body` is over the learned limit."""
        limit = self.bytes
        if limit is None:
            return
        size = body_size(body)
        if size > limit:
            raise BodyTooLarge(
                f"{request}: the request body ({size} bytes) is over the cloud's limit "
                f"({limit} bytes, learned from a 413)",
                size=size,
            )


def body_size(body: Body) -> int:
    """The bytes of `body` as the HTTP client sends it (msgspec's compact JSON)."""
    return len(msgspec.json.encode(body))


class Api:
    def __init__(self, *, client: OpenStackClient, backoff: PendingBackoff) -> None:
        self._client = client
        self.backoff = backoff
        self.body_limit = BodyLimit()

    # --- load balancers --------------------------------------------------------------------------
    def find_lbs(self, name: str) -> list[LoadBalancer]:
        return self._client.list_all(
            LoadBalancer,
            "load-balancer",
            "/lbaas/loadbalancers",
            key="loadbalancers",
            request="loadbalancer_list",
            params={"name": name},
        )

    def get_lb(self, lb_id: str) -> LoadBalancer | None:
        try:
            return self._client.call_json(
                LoadBalancerEnvelope,
                "load-balancer",
                "GET",
                f"/lbaas/loadbalancers/{lb_id}",
                request="loadbalancer_get",
            ).loadbalancer
        except CloudNotFound:
            return None

    def create_lb(self, body: Body) -> LoadBalancer:
        """`BodyTooLarge` when the cloud's body limit refuses it (nothing was created)."""
        envelope = {"loadbalancer": body}
        self.body_limit.check(envelope, "loadbalancer_create")
        content = self._sized(
            envelope,
            lambda: self._client.call(
                "load-balancer",
                "POST",
                "/lbaas/loadbalancers",
                request="loadbalancer_create",
                body=envelope,
                ok=(201, 202),
            ),
        )
        return _decode(LoadBalancerEnvelope, content).loadbalancer

    def update_lb_tags(self, lb_id: str, tags: list[str]) -> None:
        self.update_lb(lb_id, {"tags": tags})

    def update_lb(self, lb_id: str, body: Body) -> None:
        self.write(
            lb_id,
            "PUT",
            f"/lbaas/loadbalancers/{lb_id}",
            request="loadbalancer_update",
            body={"loadbalancer": body},
        )

    def lbs_tagged(self, tag: str) -> list[LoadBalancer]:
        """Every load balancer carrying `tag` (Octavia's `tags` filter, API 2.5)."""
        return self._client.list_all(
            LoadBalancer,
            "load-balancer",
            "/lbaas/loadbalancers",
            key="loadbalancers",
            request="loadbalancer_list",
            params={"tags": tag},
        )

    def all_lbs(self) -> list[LoadBalancer]:
        return self._client.list_all(
            LoadBalancer,
            "load-balancer",
            "/lbaas/loadbalancers",
            key="loadbalancers",
            request="loadbalancer_list",
        )

    def delete_lb(self, lb_id: str, *, cascade: bool) -> None:
        try:
            self.write(
                lb_id,
                "DELETE",
                f"/lbaas/loadbalancers/{lb_id}",
                request="loadbalancer_delete",
                params={"cascade": "true"} if cascade else None,
                ok=(202, 204),
            )
        except CloudNotFound:
            return

    # --- listeners -------------------------------------------------------------------------------
    def listeners(self, lb_id: str) -> list[Listener]:
        listing = self._client.list_all(
            Listener,
            "load-balancer",
            "/lbaas/listeners",
            key="listeners",
            request="listener_list",
            params={"loadbalancer_id": lb_id},
        )
        return [li for li in listing if _belongs(li.loadbalancers, lb_id)]

    def create_listener(self, lb_id: str, body: Body) -> Listener:
        content = self.write(
            lb_id,
            "POST",
            "/lbaas/listeners",
            request="listener_create",
            body={"listener": {**body, "loadbalancer_id": lb_id}},
            ok=(201,),
        )
        return _decode(ListenerEnvelope, content).listener

    def update_listener(self, lb_id: str, listener_id: str, body: Body) -> None:
        self.write(
            lb_id,
            "PUT",
            f"/lbaas/listeners/{listener_id}",
            request="listener_update",
            body={"listener": body},
        )

    def delete_listener(self, lb_id: str, listener_id: str) -> None:
        self._delete(lb_id, f"/lbaas/listeners/{listener_id}", request="listener_delete")

    # --- pools and members -----------------------------------------------------------------------
    def pools(self, lb_id: str) -> list[Pool]:
        listing = self._client.list_all(
            Pool,
            "load-balancer",
            "/lbaas/pools",
            key="pools",
            request="pool_list",
            params={"loadbalancer_id": lb_id},
        )
        return [pool for pool in listing if _belongs(pool.loadbalancers, lb_id)]

    def create_pool(self, lb_id: str, body: Body) -> Pool:
        content = self.write(
            lb_id, "POST", "/lbaas/pools", request="pool_create", body={"pool": body}, ok=(201,)
        )
        return _decode(PoolEnvelope, content).pool

    def update_pool(self, lb_id: str, pool_id: str, body: Body) -> None:
        self.write(
            lb_id, "PUT", f"/lbaas/pools/{pool_id}", request="pool_update", body={"pool": body}
        )

    def delete_pool(self, lb_id: str, pool_id: str) -> None:
        self._delete(lb_id, f"/lbaas/pools/{pool_id}", request="pool_delete")

    def members(self, pool_id: str) -> list[Member]:
        return self._client.list_all(
            Member,
            "load-balancer",
            f"/lbaas/pools/{pool_id}/members",
            key="members",
            request="member_list",
        )

    def create_member(self, lb_id: str, pool_id: str, body: Body) -> None:
        self.write(
            lb_id,
            "POST",
            f"/lbaas/pools/{pool_id}/members",
            request="member_create",
            body={"member": body},
            ok=(201,),
        )

    def delete_member(self, lb_id: str, pool_id: str, member_id: str) -> None:
        self._delete(lb_id, f"/lbaas/pools/{pool_id}/members/{member_id}", request="member_delete")

    def replace_members(self, lb_id: str, pool_id: str, members: list[Body]) -> None:
        """The batch update: Octavia adds, updates and removes to match the list (202).
        `BodyTooLarge` when the list is over the cloud's body limit."""
        self._batch_members(lb_id, pool_id, members, additive_only=False)

    def add_members(self, lb_id: str, pool_id: str, members: list[Body]) -> None:
        """The batch update with `additive_only`: adds (or updates) these members, keeps
        every other one."""
        self._batch_members(lb_id, pool_id, members, additive_only=True)

    def _batch_members(
        self, lb_id: str, pool_id: str, members: list[Body], *, additive_only: bool
    ) -> None:
        body = {"members": members}
        self.body_limit.check(body, "member_batch_update")
        self._sized(
            body,
            lambda: self.write(
                lb_id,
                "PUT",
                f"/lbaas/pools/{pool_id}/members",
                request="member_batch_update",
                body=body,
                params={"additive_only": "true"} if additive_only else None,
                ok=(202,),
            ),
        )

    def _sized(self, body: Body, send: Callable[[], bytes]) -> bytes:
        """`send()`, turning a 413 into `BodyTooLarge` (and learning the limit)."""
        try:
            return send()
        except CloudError as exc:
            if exc.status != 413:
                raise
            size = body_size(body)
            self.body_limit.refused(size)
            raise BodyTooLarge(str(exc), size=size) from exc

    # --- health monitors -------------------------------------------------------------------------
    def get_monitor(self, monitor_id: str) -> HealthMonitor | None:
        try:
            return self._client.call_json(
                HealthMonitorEnvelope,
                "load-balancer",
                "GET",
                f"/lbaas/healthmonitors/{monitor_id}",
                request="healthmonitor_get",
            ).healthmonitor
        except CloudNotFound:
            return None

    def create_monitor(self, lb_id: str, body: Body) -> None:
        self.write(
            lb_id,
            "POST",
            "/lbaas/healthmonitors",
            request="healthmonitor_create",
            body={"healthmonitor": body},
            ok=(201,),
        )

    def update_monitor(self, lb_id: str, monitor_id: str, body: Body) -> None:
        self.write(
            lb_id,
            "PUT",
            f"/lbaas/healthmonitors/{monitor_id}",
            request="healthmonitor_update",
            body={"healthmonitor": body},
        )

    def delete_monitor(self, lb_id: str, monitor_id: str) -> None:
        self._delete(lb_id, f"/lbaas/healthmonitors/{monitor_id}", request="healthmonitor_delete")

    # --- Octavia writes --------------------------------------------------------------------------
    def write(
        self,
        lb_id: str,
        method: str,
        path: str,
        *,
        request: str,
        body: Body | None = None,
        params: Mapping[str, str] | None = None,
        ok: tuple[int, ...] = (200,),
    ) -> bytes:
        """One Octavia write; a 409 while the load balancer is PENDING_* is `RetryAfter`."""
        try:
            return self._client.call(
                "load-balancer", method, path, request=request, body=body, params=params, ok=ok
            )
        except CloudConflict as exc:
            if is_busy(exc):
                raise self.backoff.retry(lb_id, "is busy (HTTP 409)") from exc
            raise

    def _delete(self, lb_id: str, path: str, *, request: str) -> None:
        try:
            self.write(lb_id, "DELETE", path, request=request, ok=(202, 204))
        except CloudNotFound:
            return

    # --- Neutron ---------------------------------------------------------------------------------
    def floating_ips(self, **filters: str) -> list[FloatingIp]:
        return self._client.list_all(
            FloatingIp,
            "network",
            "/floatingips",
            key="floatingips",
            request="floatingip_list",
            params=filters,
        )

    def create_floating_ip(self, body: Body) -> FloatingIp:
        return self._client.call_json(
            FloatingIpEnvelope,
            "network",
            "POST",
            "/floatingips",
            request="floatingip_create",
            body={"floatingip": body},
            ok=(201,),
        ).floatingip

    def attach_floating_ip(self, fip_id: str, port_id: str | None) -> FloatingIp:
        return self._client.call_json(
            FloatingIpEnvelope,
            "network",
            "PUT",
            f"/floatingips/{fip_id}",
            request="floatingip_update",
            body={"floatingip": {"port_id": port_id}},
        ).floatingip

    def set_tags(self, collection: str, resource_id: str, tags: list[str]) -> None:
        """Neutron's standard-attr tags: replace a floating IP's or security group's tags
        (`collection` "floatingips" or "security-groups"). Neutron takes no tags in the POST
        of either, so a create is followed by this call."""
        self._client.call(
            "network",
            "PUT",
            f"/{collection}/{resource_id}/tags",
            request=f"{collection.replace('-', '_').rstrip('s')}_tags_update",
            body={"tags": tags},
        )

    def security_groups(self, **filters: str) -> list[SecurityGroup]:
        return self._client.list_all(
            SecurityGroup,
            "network",
            "/security-groups",
            key="security_groups",
            request="security_group_list",
            params=filters,
        )

    def delete_floating_ip(self, fip_id: str) -> None:
        try:
            self._client.call(
                "network",
                "DELETE",
                f"/floatingips/{fip_id}",
                request="floatingip_delete",
                ok=(204,),
            )
        except CloudNotFound:
            return

    def external_networks(self) -> list[Network]:
        return self._client.list_all(
            Network,
            "network",
            "/networks",
            key="networks",
            request="network_list",
            params={"router:external": "true"},
        )

    def subnets(
        self, *, network_id: str, tag_filter: tuple[str, str] | None = None
    ) -> list[Subnet]:
        params = {"network_id": network_id}
        if tag_filter is not None:
            params[tag_filter[0]] = tag_filter[1]
        return self._client.list_all(
            Subnet, "network", "/subnets", key="subnets", request="subnet_list", params=params
        )

    def get_subnet(self, subnet_id: str) -> Subnet:
        return self._client.call_json(
            SubnetEnvelope, "network", "GET", f"/subnets/{subnet_id}", request="subnet_get"
        ).subnet

    def server_ports(self, server_id: str) -> list[Port]:
        return self._client.list_all(
            Port,
            "network",
            "/ports",
            key="ports",
            request="port_list",
            params={"device_id": server_id},
        )

    def ports_with_group(self, group_id: str) -> list[Port]:
        return self._client.list_all(
            Port,
            "network",
            "/ports",
            key="ports",
            request="port_list",
            params={"security_groups": group_id},
        )

    def update_port_groups(self, port_id: str, groups: list[str]) -> None:
        self._client.call(
            "network",
            "PUT",
            f"/ports/{port_id}",
            request="port_update",
            body={"port": {"security_groups": groups}},
        )

    # --- security groups -------------------------------------------------------------------------
    def find_security_groups(self, name: str) -> list[SecurityGroup]:
        return self._client.list_all(
            SecurityGroup,
            "network",
            "/security-groups",
            key="security_groups",
            request="security_group_list",
            params={"name": name},
        )

    def create_security_group(self, name: str, description: str) -> SecurityGroup:
        return self._client.call_json(
            SecurityGroupEnvelope,
            "network",
            "POST",
            "/security-groups",
            request="security_group_create",
            body={"security_group": {"name": name, "description": description}},
            ok=(201,),
        ).security_group

    def delete_security_group(self, group_id: str) -> None:
        try:
            self._client.call(
                "network",
                "DELETE",
                f"/security-groups/{group_id}",
                request="security_group_delete",
                ok=(204,),
            )
        except CloudNotFound:
            return

    def security_group_rules(self, group_id: str) -> list[SecurityGroupRule]:
        return self._client.list_all(
            SecurityGroupRule,
            "network",
            "/security-group-rules",
            key="security_group_rules",
            request="security_group_rule_list",
            params={"security_group_id": group_id},
        )

    def create_security_group_rule(self, body: Body) -> None:
        try:
            self._client.call(
                "network",
                "POST",
                "/security-group-rules",
                request="security_group_rule_create",
                body={"security_group_rule": body},
                ok=(201,),
            )
        except CloudConflict:
            return  # the same rule exists already: what we wanted

    def delete_security_group_rule(self, rule_id: str) -> None:
        try:
            self._client.call(
                "network",
                "DELETE",
                f"/security-group-rules/{rule_id}",
                request="security_group_rule_delete",
                ok=(204,),
            )
        except CloudNotFound:
            return


def _belongs(refs: list[Ref], lb_id: str) -> bool:
    """Also checked here: an API that ignored the `loadbalancer_id` filter (as some
    proxies and the simulator do) must not make another Service's listeners look ours."""
    return not refs or any(ref.id == lb_id for ref in refs)


def _decode(kind: type[T], content: bytes) -> T:
    try:
        return decode_json(content, kind)
    except msgspec.DecodeError as exc:
        raise CloudError(f"unexpected response body ({exc})") from exc
