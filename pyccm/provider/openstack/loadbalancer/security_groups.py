"""Per-Service security groups on member ports (`manage-security-groups`,
docs/upstream.md#security-groups).

With the option on, each Service gets a group `lb-sg-<uid>-<ns>-<name>` whose ingress
rules open its node ports (and its health-check node port, or kube-proxy's health port that
its monitors check) to the member subnet (to the source ranges with ovn, which keeps client
addresses), attached to the member ports of the nodes. Deletion always looks for the group,
as upstream does, so turning the option off never leaves one behind. Only ingress rules are
compared; of the egress rules, only the two Neutron gives every new group (any protocol,
port and address) are deleted, as upstream's controller deletes every rule it does not
want: a group pyccm made is then the group upstream would have made, and upstream takes it
back without a write (docs/migration.md).
A node port's egress is its own groups' business.

A dual-stack Service has one group with the rules of each family it is served in: each
family's member subnet gives that family's rules (Neutron refuses a rule whose ethertype
and prefix differ), and a node's port gets the group when it holds any of the node's
member addresses.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any

from pyccm.protocol.views import Node, Service
from pyccm.provider.errors import CloudConflict, InvalidProviderId
from pyccm.provider.openstack.common.provider_ids import parse_provider_id
from pyccm.provider.openstack.loadbalancer import naming
from pyccm.provider.openstack.loadbalancer.api import (
    PORTS,
    SECURITY_GROUP_RULES,
    SECURITY_GROUPS,
    SUBNETS,
    Api,
)
from pyccm.provider.openstack.loadbalancer.members import MemberChoice, member_address
from pyccm.provider.openstack.loadbalancer.resources import SecurityGroup, SecurityGroupRule
from pyccm.provider.openstack.loadbalancer.service_annotations import Events
from pyccm.provider.openstack.loadbalancer.service_config import ServiceConfig, eligible_nodes

Rule = tuple[str, str, str, int, int, str]  # direction, protocol, ethertype, min, max, prefix


def _rule_of(rule: SecurityGroupRule) -> Rule | None:
    if rule.direction != "ingress" or rule.port_range_min is None or rule.port_range_max is None:
        return None
    return (
        rule.direction,
        (rule.protocol or "").lower(),
        rule.ethertype,
        rule.port_range_min,
        rule.port_range_max,
        rule.remote_ip_prefix or "",
    )


def _is_default_egress(rule: SecurityGroupRule) -> bool:
    """One of the rules Neutron adds to a new group: egress to anywhere, any protocol."""
    return (
        rule.direction == "egress"
        and not rule.protocol
        and rule.port_range_min is None
        and rule.port_range_max is None
        and not rule.remote_ip_prefix
        and not rule.remote_group_id
    )


def wanted_rules(cfg: ServiceConfig, service: Service, subnet_cidr: str) -> set[Rule]:
    """The ingress rules for the members on the subnet `subnet_cidr` (one family)."""
    network = ipaddress.ip_network(subnet_cidr, strict=False)
    ethertype = "IPv6" if network.version == 6 else "IPv4"
    sources = [str(network)]
    if cfg.lb_provider == "ovn" and cfg.source_ranges:
        # ovn has no allowed_cidrs: the source ranges of this family become the rules'
        # remote prefixes (none of this family: its node ports stay closed).
        sources = [
            r for r in cfg.source_ranges if ipaddress.ip_network(r).version == network.version
        ]
    rules: set[Rule] = set()
    hc_port = service.spec.health_check_node_port
    if hc_port:
        rules.add(("ingress", "tcp", ethertype, hc_port, hc_port, str(network)))
    if cfg.monitor is not None and cfg.monitor.kube_proxy:
        # The monitors check kube-proxy's health port of each node.
        health = cfg.monitor.http_port
        rules.add(("ingress", "tcp", ethertype, health, health, str(network)))
    for port in service.spec.ports:
        if port.node_port:
            for source in sources:
                rules.add(
                    (
                        "ingress",
                        port.protocol.lower(),
                        ethertype,
                        port.node_port,
                        port.node_port,
                        source,
                    )
                )
    return rules


class SecurityGroups:
    def __init__(self, *, api: Api, events: Events, cluster_id: str = "") -> None:
        self._api = api
        self._events = events
        # Set: groups carry this cluster's tag (added after the create, or to an untagged
        # group found by name); a group tagged by another cluster is never deleted.
        self._cluster_id = cluster_id

    def ensure(
        self,
        families: Sequence[ServiceConfig],
        service: Service,
        nodes: Sequence[Node],
        choices: Sequence[MemberChoice],
    ) -> None:
        """`families`: the config of each load balancer the Service is served by;
        `choices`: how their members' addresses are chosen (the ports to attach hold them)."""
        cfg = families[0]
        if not cfg.manage_security_groups:
            return
        group = self._group(cfg, service)
        self._rules(families, service, group)
        self._attach(families, group, nodes, choices)

    def update_members(
        self,
        families: Sequence[ServiceConfig],
        service: Service,
        nodes: Sequence[Node],
        choices: Sequence[MemberChoice],
    ) -> None:
        if families[0].manage_security_groups:
            self._attach(families, self._group(families[0], service), nodes, choices)

    def delete(self, cfg: ServiceConfig, service: Service) -> None:
        for group in self._api.find(SECURITY_GROUPS, {"name": naming.security_group_name(service)}):
            if not self.mine(group):
                continue
            for port in self._api.ports({"security_groups": group.id}):
                groups = [g for g in port.security_groups if g != group.id]
                self._api.update(PORTS, port.id, {"security_groups": groups})
            self._api.delete(SECURITY_GROUPS, group.id)

    def _group(self, cfg: ServiceConfig, service: Service) -> SecurityGroup:
        name = naming.security_group_name(service)
        found = self._api.find(SECURITY_GROUPS, {"name": name})
        if found:
            self.tag(found[0])
            return found[0]
        description = naming.security_group_description(service, cluster=cfg.cluster)
        group = self._api.create(SECURITY_GROUPS, {"name": name, "description": description})
        self.tag(group)
        return group

    def mine(self, group: SecurityGroup) -> bool:
        holder = naming.owner_of(group.tags)
        return not self._cluster_id or holder in (None, self._cluster_id)

    def tag(self, group: SecurityGroup) -> None:
        if self._cluster_id and naming.owner_of(group.tags) is None:
            tags = [*group.tags, naming.owner_tag(self._cluster_id)]
            self._api.set_tags(SECURITY_GROUPS, group.id, tags)

    def _rules(
        self, families: Sequence[ServiceConfig], service: Service, group: SecurityGroup
    ) -> None:
        wanted: set[Rule] = set()
        for cfg, subnet_id in _member_subnets(families):
            wanted |= wanted_rules(cfg, service, self._api.get(SUBNETS, subnet_id).cidr)
        current: dict[Rule, str] = {}
        defaults: list[str] = []
        for rule in self._api.find(SECURITY_GROUP_RULES, {"security_group_id": group.id}):
            key = _rule_of(rule)
            if key is not None:
                current[key] = rule.id
            elif _is_default_egress(rule):
                defaults.append(rule.id)
        for key in wanted - current.keys():
            try:
                self._api.create(SECURITY_GROUP_RULES, _rule_body(group.id, key))
            except CloudConflict:
                continue  # the same rule exists already: what we wanted
        for key, rule_id in current.items():
            if key not in wanted:
                self._api.delete(SECURITY_GROUP_RULES, rule_id)
        for rule_id in defaults:
            self._api.delete(SECURITY_GROUP_RULES, rule_id)

    def _attach(
        self,
        families: Sequence[ServiceConfig],
        group: SecurityGroup,
        nodes: Sequence[Node],
        choices: Sequence[MemberChoice],
    ) -> None:
        # One listing of the ports that have the group already, so that only the nodes
        # still without it cost a port lookup each (not every node on every sync).
        attached = {
            fixed.ip_address
            for port in self._api.ports({"security_groups": group.id})
            for fixed in port.fixed_ips
        }
        for node in eligible_nodes(families[0], nodes):
            addresses = {a for c in choices if (a := member_address(node, c))}
            if not addresses or addresses <= attached:
                continue
            try:
                _, server_id = parse_provider_id(node.spec.provider_id)
            except InvalidProviderId:
                continue  # not initialized yet: the next sync attaches it
            for port in self._api.ports({"device_id": server_id}):
                holds = any(ip.ip_address in addresses for ip in port.fixed_ips)
                if holds and port.port_security_enabled and group.id not in port.security_groups:
                    self._api.update(
                        PORTS, port.id, {"security_groups": [*port.security_groups, group.id]}
                    )


def _member_subnets(families: Sequence[ServiceConfig]) -> list[tuple[ServiceConfig, str]]:
    """(config, member subnet) of each family served, additional VIPs' included."""
    found = [(cfg, cfg.member_subnet_id) for cfg in families]
    found += [(cfg, cfg.extra_member_subnet_id) for cfg in families if cfg.extra_version]
    return [(cfg, subnet) for cfg, subnet in found if subnet]


def _rule_body(group_id: str, rule: Rule) -> dict[str, Any]:
    direction, protocol, ethertype, low, high, prefix = rule
    return {
        "security_group_id": group_id,
        "direction": direction,
        "protocol": protocol,
        "ethertype": ethertype,
        "port_range_min": low,
        "port_range_max": high,
        "remote_ip_prefix": prefix,
    }
