"""Lean views of the Nova and Neutron JSON the provider reads
(docs/architecture.md#style-typed-views).

Only the fields the provider uses, decoded with msgspec right where the response enters;
unknown fields are ignored, so a newer cloud never breaks decoding. Field names are the
API's own (`OS-EXT-AZ:availability_zone`, `OS-EXT-IPS:type`).
"""

from __future__ import annotations

import msgspec


class _Json(msgspec.Struct, frozen=True):
    pass


class ServerAddress(_Json, frozen=True):
    addr: str
    type: str = msgspec.field(default="", name="OS-EXT-IPS:type")


class ServerFlavor(_Json, frozen=True):
    id: str = ""
    original_name: str = ""


class Server(_Json, frozen=True):
    id: str
    name: str = ""
    status: str = ""
    addresses: dict[str, list[ServerAddress]] = {}
    access_ipv4: str = msgspec.field(default="", name="accessIPv4")
    access_ipv6: str = msgspec.field(default="", name="accessIPv6")
    metadata: dict[str, str] = {}
    flavor: ServerFlavor | None = None
    availability_zone: str = msgspec.field(default="", name="OS-EXT-AZ:availability_zone")


class ServerEnvelope(_Json, frozen=True):
    server: Server


class Flavor(_Json, frozen=True):
    id: str
    name: str = ""


class FlavorEnvelope(_Json, frozen=True):
    flavor: Flavor


class FixedIp(_Json, frozen=True):
    ip_address: str
    subnet_id: str = ""


class AddressPair(_Json, frozen=True, omit_defaults=True):
    ip_address: str
    mac_address: str = ""


class SubPort(_Json, frozen=True):
    port_id: str


class TrunkDetails(_Json, frozen=True):
    trunk_id: str = ""
    sub_ports: list[SubPort] = []


class Port(_Json, frozen=True):
    id: str
    network_id: str = ""
    device_id: str = ""
    status: str = ""
    fixed_ips: list[FixedIp] = []
    allowed_address_pairs: list[AddressPair] = []
    security_groups: list[str] = []
    # Neutron omits it without the port-security extension: security is then on.
    port_security_enabled: bool | None = True
    trunk_details: TrunkDetails | None = None


class PortEnvelope(_Json, frozen=True):
    port: Port


class Network(_Json, frozen=True):
    id: str
    name: str = ""
    external: bool = msgspec.field(default=False, name="router:external")
    subnets: list[str] = []


class NetworkEnvelope(_Json, frozen=True):
    network: Network


class RouterRoute(_Json, frozen=True):
    destination: str
    nexthop: str


class Router(_Json, frozen=True):
    id: str
    routes: list[RouterRoute] = []
    name: str = ""
    # Neutron's standard-attr tags: the `pyccm-routes` claims (`provider.route_claims`).
    tags: list[str] = []


class RouterEnvelope(_Json, frozen=True):
    router: Router


class Extension(_Json, frozen=True):
    alias: str


class ExtensionList(_Json, frozen=True):
    extensions: list[Extension]
