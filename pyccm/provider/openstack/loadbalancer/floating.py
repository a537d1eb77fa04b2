"""Floating IPs of load balancers (docs/upstream.md#floating-ips), idempotent across crashes.

The only write that allocates an address is one `POST /floatingips` that carries the VIP
port, so a floating IP either exists *on the VIP port* or not at all: a sync that crashed
after the POST finds it with `GET ?port_id=` and never allocates a second one. An address
pyccm allocated earlier and that lost its port (the load balancer was recreated after an
ERROR, or `keep-floatingip` kept it) is found by its description and re-attached before
anything new is allocated, so the Service keeps its address.

Only addresses whose description carries upstream's marker are ever deleted: a user's own
floating IP (`loadBalancerIP`) is detached at most.
"""

from __future__ import annotations

import fnmatch
import re

from pyccm.provider.errors import CloudError
from pyccm.provider.openstack.loadbalancer.api import FLOATING_IPS, SUBNETS, Api
from pyccm.provider.openstack.loadbalancer.naming import FIP_MARKER, owner_of, owner_tag
from pyccm.provider.openstack.loadbalancer.resources import FloatingIp, LoadBalancer, Subnet
from pyccm.provider.openstack.loadbalancer.service_annotations import Events
from pyccm.provider.openstack.loadbalancer.service_config import FloatingSubnet, ServiceConfig

Body = dict[str, object]


def tag_filter(spec: str) -> tuple[str, str] | None:
    """`floating-subnet-tags` as a Neutron list filter: `a,b` any, `&a,b` all, `!` negates."""
    text = spec.strip()
    negate = text.startswith("!")
    text = text.removeprefix("!")
    every = text.startswith("&")
    text = text.removeprefix("&").strip()
    if not text:
        return None
    name = {
        (False, False): "tags-any",
        (False, True): "tags",
        (True, False): "not-tags-any",
        (True, True): "not-tags",
    }[(negate, every)]
    return name, text


def name_matches(pattern: str, name: str) -> bool:
    """`floating-subnet`: a glob, a regexp when prefixed `~`, negated by a leading `!`."""
    negate = pattern.startswith("!")
    pattern = pattern.removeprefix("!")
    if pattern.startswith("~"):
        try:
            found = re.search(pattern[1:], name) is not None
        except re.error:
            found = False
    else:
        found = fnmatch.fnmatchcase(name, pattern)
    return found != negate


def is_ours(fip: FloatingIp) -> bool:
    return FIP_MARKER in fip.description


class FloatingIps:
    def __init__(self, *, api: Api, events: Events, cluster_id: str = "") -> None:
        self._api = api
        self._events = events
        # Set: the addresses pyccm allocates carry this cluster's tag; an untagged one with
        # upstream's marker is tagged when found on the VIP of this cluster's load balancer,
        # and one tagged by another cluster is never taken, released or deleted.
        self._cluster_id = cluster_id

    def mine(self, fip: FloatingIp) -> bool:
        """Allocated by pyccm (upstream's marker) and not owned by another cluster."""
        holder = owner_of(fip.tags)
        return is_ours(fip) and (not self._cluster_id or holder in (None, self._cluster_id))

    def tag(self, fip: FloatingIp) -> None:
        """Adds this cluster's tag to an address pyccm allocated (once)."""
        if self._cluster_id and owner_of(fip.tags) is None:
            tags = [*fip.tags, owner_tag(self._cluster_id)]
            self._api.set_tags(FLOATING_IPS, fip.id, tags)

    def address(
        self,
        cfg: ServiceConfig,
        lb: LoadBalancer,
        *,
        owner: bool,
        fresh: bool = False,
        private: str = "",
    ) -> str:
        """The Service's public address: a floating IP on the VIP, or the VIP itself.
        `fresh`: `lb` was created by this process and this is its first address lookup, so
        its VIP port is brand new and holds no floating IP yet (were one attached
        meanwhile, the POST below would get a 409 and the next sync would find it).
        `private`: the IPv4 address of the VIP port the floating IP stands for, when it is
        not the VIP's own (an additional VIP); the address given when there is none."""
        private = private or lb.vip_address
        attached = [] if fresh else self._api.find(FLOATING_IPS, {"port_id": lb.vip_port_id})
        if cfg.internal:
            if owner:
                for fip in attached:
                    self.release(fip, keep=cfg.keep_floatingip)
            return private
        if attached:
            if owner and is_ours(attached[0]):
                self.tag(attached[0])
            return attached[0].floating_ip_address
        if not owner:
            raise CloudError(
                f"load balancer {lb.id} is shared and has no floating IP: only its owner adds one",
                retryable=False,
            )
        if cfg.load_balancer_ip:
            return self._requested(cfg, lb)
        if not cfg.floating_network_id:
            self._events.warn(
                "LoadBalancerForcedInternal",
                "no floating network is configured or found: the load balancer is internal",
            )
            return private
        return self._adopt_or_create(cfg, lb)

    def release(self, fip: FloatingIp, *, keep: bool) -> None:
        """Off the VIP: deleted when pyccm made it (unless kept), else only detached."""
        if self.mine(fip) and not keep:
            self._api.delete(FLOATING_IPS, fip.id)
        else:
            self._api.update(FLOATING_IPS, fip.id, {"port_id": None})

    def delete_ours(self, lb: LoadBalancer) -> None:
        for fip in self._api.find(FLOATING_IPS, {"port_id": lb.vip_port_id}):
            if self.mine(fip):
                self._api.delete(FLOATING_IPS, fip.id)

    def _requested(self, cfg: ServiceConfig, lb: LoadBalancer) -> str:
        """`spec.loadBalancerIP`: attach that address if it is free, else allocate it."""
        found = self._api.find(FLOATING_IPS, {"floating_ip_address": cfg.load_balancer_ip})
        if found:
            fip = found[0]
            if fip.port_id and fip.port_id != lb.vip_port_id:
                raise CloudError(f"floating IP {cfg.load_balancer_ip} is not available")
            return self._api.update(
                FLOATING_IPS, fip.id, {"port_id": lb.vip_port_id}
            ).floating_ip_address
        if not cfg.floating_network_id:
            raise CloudError(f"no floating network to allocate {cfg.load_balancer_ip} from")
        body = self._body(cfg, lb) | {"floating_ip_address": cfg.load_balancer_ip}
        if cfg.floating_subnet.subnet_id:
            body["subnet_id"] = cfg.floating_subnet.subnet_id
        return self._create(body)

    def _adopt_or_create(self, cfg: ServiceConfig, lb: LoadBalancer) -> str:
        for fip in self._api.find(FLOATING_IPS, {"description": cfg.fip_description}):
            free = not fip.port_id and fip.floating_network_id == cfg.floating_network_id
            if free and self.mine(fip):
                self.tag(fip)
                return self._api.update(
                    FLOATING_IPS, fip.id, {"port_id": lb.vip_port_id}
                ).floating_ip_address
        choice = cfg.floating_subnet
        if choice.is_matcher:
            return self._create_in_matching_subnet(cfg, lb, choice)
        body = self._body(cfg, lb)
        if choice.subnet_id:
            body["subnet_id"] = choice.subnet_id
        return self._create(body)

    def _create_in_matching_subnet(
        self, cfg: ServiceConfig, lb: LoadBalancer, choice: FloatingSubnet
    ) -> str:
        candidates = self._matching_subnets(cfg.floating_network_id, choice)
        if not candidates:
            raise CloudError(f"no subnet of network {cfg.floating_network_id} matches {choice}")
        failure: CloudError | None = None
        for subnet in candidates:
            try:
                body = self._body(cfg, lb) | {"subnet_id": subnet.id}
                return self._create(body)
            except CloudError as exc:
                failure = exc  # exhausted or refused: try the next matching subnet
        assert failure is not None
        raise failure

    def _matching_subnets(self, network_id: str, choice: FloatingSubnet) -> list[Subnet]:
        params = {"network_id": network_id}
        if (tags := tag_filter(choice.tags)) is not None:
            params[tags[0]] = tags[1]
        subnets = self._api.find(SUBNETS, params)
        if choice.name_pattern:
            subnets = [s for s in subnets if name_matches(choice.name_pattern, s.name)]
        return subnets

    def _create(self, body: Body) -> str:
        """Allocates an address on the VIP port, then tags it (Neutron takes no tags in a
        floating IP's POST). A crash in between leaves it on the VIP port, where the next
        sync finds it and tags it."""
        fip = self._api.create(FLOATING_IPS, body)
        self.tag(fip)
        return fip.floating_ip_address

    @staticmethod
    def _body(cfg: ServiceConfig, lb: LoadBalancer) -> Body:
        return {
            "floating_network_id": cfg.floating_network_id,
            "port_id": lb.vip_port_id,
            "description": cfg.fip_description,
        }
