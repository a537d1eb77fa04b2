"""Lean views of the Octavia and Neutron JSON the load-balancer code reads
(docs/architecture.md#style-typed-views).

Only the fields it compares or follows, decoded with msgspec where the response enters;
unknown fields are ignored and nullable fields default, so a newer Octavia or a field
hidden below an API version (tags < 2.5, allowed_cidrs < 2.12) never breaks decoding.
"""

from __future__ import annotations

import msgspec


# Ports and networks are the shared Neutron views of provider/openstack/resources.py.
class _Json(msgspec.Struct, frozen=True):
    pass


class Ref(_Json, frozen=True):
    id: str


class Counted(_Json, frozen=True, gc=False):
    """An item of a list that is only counted (a pool's members: at 5,000 of them, ~25
    bytes each while decoded, against ~130 for a `Ref` and its id)."""


class AdditionalVip(_Json, frozen=True):
    subnet_id: str = ""
    ip_address: str = ""


class LoadBalancer(_Json, frozen=True):
    id: str
    name: str = ""
    description: str = ""
    provisioning_status: str = ""
    operating_status: str = ""
    provider: str = ""
    vip_address: str = ""
    vip_port_id: str = ""
    vip_subnet_id: str = ""
    vip_network_id: str = ""
    # Octavia 2.26: the VIPs on the other subnets of the VIP network (dual-stack).
    additional_vips: list[AdditionalVip] | None = None
    flavor_id: str | None = None
    availability_zone: str | None = None
    tags: list[str] = []
    listeners: list[Ref] = []
    pools: list[Ref] = []
    # Set by every status change, so by every write to the load balancer or its children
    # (Octavia locks the load balancer PENDING_UPDATE for each): `verified.py` uses it as a
    # version. None until the first change.
    updated_at: str | None = None


class Listener(_Json, frozen=True):
    id: str
    name: str = ""
    protocol: str = ""
    protocol_port: int = 0
    connection_limit: int = -1
    default_pool_id: str | None = None
    default_tls_container_ref: str | None = None
    insert_headers: dict[str, str] | None = None
    allowed_cidrs: list[str] | None = None
    timeout_client_data: int | None = None
    timeout_member_connect: int | None = None
    timeout_member_data: int | None = None
    timeout_tcp_inspect: int | None = None
    tags: list[str] = []
    loadbalancers: list[Ref] = []


class Persistence(_Json, frozen=True):
    type: str = ""


class Pool(_Json, frozen=True):
    id: str
    name: str = ""
    protocol: str = ""
    lb_algorithm: str = ""
    session_persistence: Persistence | None = None
    listeners: list[Ref] = []
    healthmonitor_id: str | None = None
    # Only their number is compared (`reconcile.py`); a member is read as `Member` when needed.
    members: list[Counted] = []
    loadbalancers: list[Ref] = []
    tags: list[str] = []


class Member(_Json, frozen=True):
    id: str
    name: str = ""
    address: str = ""
    protocol_port: int = 0
    subnet_id: str | None = None
    monitor_port: int | None = None


class MemberKey(_Json, frozen=True):
    """A member as its comparison with the wanted ones reads it: upstream's key (name,
    address, port, monitor port), without the id and subnet a `Member` also keeps."""

    name: str = ""
    address: str = ""
    protocol_port: int = 0
    monitor_port: int | None = None


class HealthMonitor(_Json, frozen=True):
    id: str
    name: str = ""
    type: str = ""
    delay: int = 0
    timeout: int = 0
    max_retries: int = 0
    max_retries_down: int = 0
    url_path: str | None = None
    http_method: str | None = None
    expected_codes: str | None = None


class FloatingIp(_Json, frozen=True):
    id: str
    floating_ip_address: str = ""
    floating_network_id: str = ""
    tags: list[str] = []
    port_id: str | None = None
    description: str = ""


class Subnet(_Json, frozen=True):
    id: str
    name: str = ""
    network_id: str = ""
    cidr: str = ""
    ip_version: int = 4
    tags: list[str] = []


class SecurityGroup(_Json, frozen=True):
    id: str
    name: str = ""
    description: str = ""
    tags: list[str] = []


class SecurityGroupRule(_Json, frozen=True):
    id: str
    direction: str = ""
    ethertype: str = ""
    protocol: str | None = None
    port_range_min: int | None = None
    port_range_max: int | None = None
    remote_ip_prefix: str | None = None
    remote_group_id: str | None = None
