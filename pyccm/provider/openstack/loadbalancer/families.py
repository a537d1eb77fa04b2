"""Which load balancers serve a Service's IP families (kubernetes/cloud-provider-openstack#1937).

Upstream serves only the first of `spec.ipFamilies`, on whatever subnet is configured, so a
dual-stack Service gets one family and an IPv6 one on an IPv4 subnet gets an IPv4 VIP. Here:

* a single-stack Service keeps its one `ServiceConfig`; an IPv6 one whose configured VIP
  subnet is IPv4 moves to the VIP network's IPv6 subnet (an IPv4 Service makes no call);
* a dual-stack Service (`PreferDualStack` / `RequireDualStack`) whose VIP network has a
  subnet of each family gets, where Octavia has `additional_vips` (API 2.26), ONE load
  balancer with its VIP on the first family's subnet and an additional VIP on the other's
  (Octavia requires the same network and one VIP per subnet), its pools holding members of
  both families; on an older Octavia, one load balancer per family, the first keeping
  upstream's name (migration keeps finding it), the second named `<name>_ipv<v>`
  (`naming.family_lb_name`) and tagged like the first;
* a family the VIP network has no subnet for: `RequireDualStack` refuses the sync before
  anything is created (no half-made pair); `PreferDualStack` serves the families it can
  with a `LoadBalancerIPFamilyUnavailable` Warning saying why.

Subnets are read through a cache: a subnet's network and IP version never change in
Neutron, so each is fetched once per process; the network's subnet list is read on each
dual-stack sync until every wanted family has been found once.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import threading

from pyccm.protocol.views import Service
from pyccm.provider.errors import CloudError
from pyccm.provider.openstack.loadbalancer import naming
from pyccm.provider.openstack.loadbalancer import service_annotations as a
from pyccm.provider.openstack.loadbalancer.api import SUBNETS, Api
from pyccm.provider.openstack.loadbalancer.resources import Subnet
from pyccm.provider.openstack.loadbalancer.service_config import ALLOW_ALL, ServiceConfig

VERSIONS = {"IPv4": 4, "IPv6": 6}
DUAL_STACK_POLICIES = frozenset({"PreferDualStack", "RequireDualStack"})
UNAVAILABLE = "LoadBalancerIPFamilyUnavailable"


def wanted_versions(service: Service) -> tuple[int, ...]:
    """The IP versions the Service asks for, first family first. Two families count only
    with a dual-stack policy (the API server never pairs them with SingleStack)."""
    versions = tuple(dict.fromkeys(VERSIONS[f] for f in service.spec.ip_families if f in VERSIONS))
    if not versions:
        return (4,)
    if service.spec.ip_family_policy not in DUAL_STACK_POLICIES:
        return versions[:1]
    return versions


def other_version(version: int) -> int:
    return 6 if version == 4 else 4


def secondary_name(cfg: ServiceConfig) -> str:
    return naming.family_lb_name(cfg.name, other_version(cfg.ip_version))


def served_versions(service: Service) -> frozenset[int]:
    """The IP versions of the addresses in the Service's status (what pyccm last served)."""
    found: set[int] = set()
    for entry in service.status.load_balancer.ingress:
        try:
            found.add(ipaddress.ip_address(entry.ip).version)
        except ValueError:
            continue
    return frozenset(found)


def _in_family(ranges: tuple[str, ...], version: int) -> tuple[str, ...]:
    return tuple(r for r in ranges if ipaddress.ip_network(r).version == version)


class Families:
    """Turns a Service's resolved `ServiceConfig` into one per load balancer to ensure."""

    def __init__(self, *, api: Api) -> None:
        self._api = api
        self._lock = threading.Lock()
        self._subnets: dict[str, Subnet] = {}
        # network id -> {version: subnet id}, kept once it held every family asked for.
        self._networks: dict[str, dict[int, str]] = {}

    def configs(
        self, cfg: ServiceConfig, service: Service, events: a.Events
    ) -> list[ServiceConfig]:
        versions = wanted_versions(service)
        if versions == (4,) or cfg.vip_port_id or not (cfg.vip_subnet_id or cfg.vip_network_id):
            if len(versions) > 1:
                # The user's VIP port has the addresses it has.
                why = f"annotation {a.PORT_ID} names the VIP port"
                return [self._short(cfg, service, events, list(versions[1:]), why)]
            return [cfg]
        subnets = self._vip_subnets(cfg, versions)
        missing = [v for v in versions if v not in subnets]
        if len(versions) == 1:
            # Single-stack IPv6 on a network without an IPv6 subnet: upstream's VIP as before.
            return [self._moved(cfg, 6, subnets)] if not missing else [cfg]
        if missing:
            network = cfg.vip_network_id or self.subnet(cfg.vip_subnet_id).network_id
            why = f"the VIP network {network} has no IPv{missing[0]} subnet"
            served = [v for v in versions if v in subnets]
            if not served:
                raise CloudError(f"{service.key}: {why}", retryable=False)
            return [
                self._short(self._moved(cfg, served[0], subnets), service, events, missing, why)
            ]
        primary = self._moved(cfg, versions[0], subnets)
        second = versions[1]
        if cfg.features.additional_vips:
            return [self._with_additional_vip(primary, second, subnets)]
        return [self._family_only(primary), self._secondary(primary, second, subnets)]

    # --- building the configs ------------------------------------------------------------------
    def _short(
        self,
        cfg: ServiceConfig,
        service: Service,
        events: a.Events,
        missing: list[int],
        why: str,
    ) -> ServiceConfig:
        """A dual-stack Service served in one family: refused under RequireDualStack."""
        lost = " and ".join(f"IPv{v}" for v in missing)
        if service.spec.ip_family_policy == "RequireDualStack":
            raise CloudError(
                f"{service.key} requires dual-stack (ipFamilyPolicy RequireDualStack), but {why}; "
                "no load balancer is created or changed",
                retryable=False,
            )
        events.warn(
            UNAVAILABLE,
            f"ipFamilyPolicy PreferDualStack: {lost} not served because {why}; "
            f"serving IPv{cfg.ip_version} only",
        )
        return self._family_only(cfg)

    def _moved(self, cfg: ServiceConfig, version: int, subnets: dict[int, str]) -> ServiceConfig:
        """`cfg` with its VIP (and a member subnet that was the VIP's) in `version`."""
        subnet = subnets[version]
        member = cfg.member_subnet_id
        if not member or member == cfg.vip_subnet_id:
            member = subnet
        ranges = cfg.source_ranges
        if cfg.ip_version != version and ranges == (ALLOW_ALL[cfg.ip_version],):
            ranges = (ALLOW_ALL[version],)
        return dataclasses.replace(
            cfg,
            ip_version=version,
            vip_subnet_id=subnet,
            member_subnet_id=member,
            source_ranges=ranges,
            allowed_cidrs=ranges if cfg.allowed_cidrs is not None else None,
        )

    def _family_only(self, cfg: ServiceConfig) -> ServiceConfig:
        """One load balancer of a per-family pair: only its family's source ranges (Octavia
        refuses an allowed CIDR of a family no VIP has)."""
        ranges = _in_family(cfg.source_ranges, cfg.ip_version)
        if not ranges:
            if cfg.source_ranges != tuple(ALLOW_ALL[v] for v in (4, 6)):
                raise CloudError(
                    f"{cfg.name}: the source ranges {', '.join(cfg.source_ranges)} have no "
                    f"IPv{cfg.ip_version} CIDR, so its IPv{cfg.ip_version} load balancer "
                    "could not be restricted; add one (::/128 or 0.0.0.0/32 admits no one)",
                    retryable=False,
                )
            ranges = (ALLOW_ALL[cfg.ip_version],)
        return dataclasses.replace(
            cfg,
            source_ranges=ranges,
            allowed_cidrs=ranges if cfg.allowed_cidrs is not None else None,
        )

    def _secondary(
        self, cfg: ServiceConfig, version: int, subnets: dict[int, str]
    ) -> ServiceConfig:
        """The second family's load balancer: found by its name only (the id annotation
        names the first), no floating IP, no requested address, no user's port."""
        moved = self._moved(cfg, version, subnets)
        member = subnets[version]
        if cfg.member_subnet_id != cfg.vip_subnet_id:
            member = self._same_network(cfg.member_subnet_id, version) or ""
        return self._family_only(
            dataclasses.replace(
                moved,
                name=naming.family_lb_name(cfg.name, version),
                legacy_name="",
                lb_id="",
                load_balancer_ip="",
                member_subnet_id=member,
                secondary=True,
            )
        )

    def _with_additional_vip(
        self, cfg: ServiceConfig, version: int, subnets: dict[int, str]
    ) -> ServiceConfig:
        member = subnets[version]
        if cfg.member_subnet_id != cfg.vip_subnet_id:
            member = self._same_network(cfg.member_subnet_id, version) or ""
        ranges = cfg.source_ranges
        if ranges == (ALLOW_ALL[cfg.ip_version],):
            ranges = (ALLOW_ALL[cfg.ip_version], ALLOW_ALL[version])
        return dataclasses.replace(
            cfg,
            extra_version=version,
            extra_vip_subnet_id=subnets[version],
            extra_member_subnet_id=member,
            source_ranges=ranges,
            allowed_cidrs=ranges if cfg.allowed_cidrs is not None else None,
        )

    def split(self, cfg: ServiceConfig) -> list[ServiceConfig]:
        """A load balancer with additional VIPs is wanted, but the Service's existing one was
        created without (Octavia cannot add VIPs to a load balancer): the other family gets
        its own load balancer instead."""
        version = cfg.extra_version
        primary = dataclasses.replace(
            cfg,
            extra_version=0,
            extra_vip_subnet_id="",
            extra_member_subnet_id="",
            source_ranges=_in_family(cfg.source_ranges, cfg.ip_version) or cfg.source_ranges,
        )
        secondary = self._secondary(
            dataclasses.replace(primary, source_ranges=cfg.source_ranges),
            version,
            {version: cfg.extra_vip_subnet_id},
        )
        return [
            self._family_only(primary),
            dataclasses.replace(secondary, member_subnet_id=cfg.extra_member_subnet_id),
        ]

    # --- subnets -------------------------------------------------------------------------------
    def _vip_subnets(self, cfg: ServiceConfig, versions: tuple[int, ...]) -> dict[int, str]:
        """{version: subnet id} on the VIP network: the configured subnet for its own family,
        the network's first subnet of each other family."""
        found: dict[int, str] = {}
        network = cfg.vip_network_id
        if cfg.vip_subnet_id:
            subnet = self.subnet(cfg.vip_subnet_id)
            found[subnet.ip_version] = subnet.id
            network = network or subnet.network_id
        if all(v in found for v in versions):
            return found
        return self._network_subnets(network, versions) | found

    def _same_network(self, subnet_id: str, version: int) -> str | None:
        """A subnet of `version` on the network of `subnet_id` (members of that family)."""
        subnet = self.subnet(subnet_id)
        if subnet.ip_version == version:
            return subnet.id
        return self._network_subnets(subnet.network_id, (version,)).get(version)

    def _network_subnets(self, network_id: str, versions: tuple[int, ...]) -> dict[int, str]:
        with self._lock:
            known = self._networks.get(network_id)
        if known is not None and all(v in known for v in versions):
            return known
        found: dict[int, str] = {}
        for subnet in self._api.find(SUBNETS, {"network_id": network_id}):
            found.setdefault(subnet.ip_version, subnet.id)
            with self._lock:
                self._subnets[subnet.id] = subnet
        if all(v in found for v in versions):
            with self._lock:
                self._networks[network_id] = found
        return found

    def subnet(self, subnet_id: str) -> Subnet:
        """A subnet, read once per process (its network, version and CIDR never change)."""
        with self._lock:
            known = self._subnets.get(subnet_id)
        if known is not None:
            return known
        subnet = self._api.get(SUBNETS, subnet_id)
        with self._lock:
            self._subnets[subnet_id] = subnet
        return subnet
