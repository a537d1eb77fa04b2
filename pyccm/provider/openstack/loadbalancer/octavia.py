"""`LoadBalancers` on Octavia: upstream's EnsureLoadBalancer flow without the waiting.

Upstream blocks a sync thread for up to 271 s polling for ACTIVE after every write. Here
a sync does what the cloud's current state allows and stops: a load balancer that is
PENDING_* (just created, or busy with the previous write) raises `RetryAfter` with a short
delay that grows while it stays pending, and the next sync re-reads the cloud and carries
on. Between syncs a process remembers only that delay, what saves reads, and the ids of
annotated load balancers it deleted to replace them, so a restarted worker resumes where a
crashed one stopped; the one loss is a replacement not yet created, whose Service then
waits for its id annotation to be removed.

Idempotence comes from looking before creating: the load balancer is found by the
`load-balancer-id` annotation or by name (and the legacy name) before any create; an id
annotation that names no load balancer (and none holds the name) is an error, never a
create, unless this process deleted that one (in ERROR) to replace it. Its children are
compared with the desired specs; the floating IP is found on the VIP port or
by its description (`floating.py`). A retry after a crash at any point creates nothing
twice.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Sequence
from functools import partial
from typing import Any

from pyccm.protocol.views import LoadBalancerIngress, Node, Service
from pyccm.provider.errors import CloudError, OwnedByAnotherCluster, RetryAfter
from pyccm.provider.interface import (
    LoadBalancerOutcome,
    LoadBalancerPlan,
    NodeSelector,
    OwnedResource,
    ProviderEvent,
)
from pyccm.provider.openstack.common.features import CloudFeatures
from pyccm.provider.openstack.config import LiveSettings
from pyccm.provider.openstack.loadbalancer import naming
from pyccm.provider.openstack.loadbalancer import service_annotations as a
from pyccm.provider.openstack.loadbalancer.api import (
    ACTIVE,
    ERROR,
    FLOATING_IPS,
    HEALTH_MONITORS,
    LISTENERS,
    LOADBALANCERS,
    PENDING_DELETE,
    POOLS,
    Api,
    BodyTooLarge,
    is_pending,
)
from pyccm.provider.openstack.loadbalancer.batch import JustWritten
from pyccm.provider.openstack.loadbalancer.desired import (
    ListenerSpec,
    added_tags,
    desired_listeners,
    fingerprint,
)
from pyccm.provider.openstack.loadbalancer.families import (
    Families,
    secondary_name,
    served_versions,
    wanted_versions,
)
from pyccm.provider.openstack.loadbalancer.floating import FloatingIps
from pyccm.provider.openstack.loadbalancer.ip_mode import ip_mode
from pyccm.provider.openstack.loadbalancer.members import Backend, Backends, MemberChoice
from pyccm.provider.openstack.loadbalancer.naming import SERVICE_PREFIX, is_service_tag
from pyccm.provider.openstack.loadbalancer.orphans import Inventory
from pyccm.provider.openstack.loadbalancer.plan import DryRunClient, planned_changes
from pyccm.provider.openstack.loadbalancer.reconcile import Reconciler
from pyccm.provider.openstack.loadbalancer.resources import Listener, LoadBalancer
from pyccm.provider.openstack.loadbalancer.security_groups import SecurityGroups
from pyccm.provider.openstack.loadbalancer.service_config import Resolver, ServiceConfig
from pyccm.provider.openstack.loadbalancer.verified import Verified
from pyccm.provider.openstack.transport.client import OpenStackClient
from pyccm.provider.settings import ProviderSettings

log = logging.getLogger(__name__)

DELETED = "DELETED"
# Nodes left out of the pools: none of their addresses fits the member choice.
MEMBER_ADDRESS_MISSING = "LoadBalancerNodeAddressMissing"
GONE = frozenset({DELETED, PENDING_DELETE})
# The monitor types that check the Service's port itself (upstream's, by port protocol).
PORT_MONITOR_TYPES = frozenset({"TCP", "UDP-CONNECT", "SCTP"})


def ingress(cfg: ServiceConfig, address: str) -> tuple[LoadBalancerIngress, ...]:
    """`status.loadBalancer.ingress` (docs/upstream.md#status)."""
    if cfg.hostname:
        return (LoadBalancerIngress(hostname=cfg.hostname),)
    if cfg.proxy and cfg.hostname_suffix:
        return (LoadBalancerIngress(hostname=f"{address}.{cfg.hostname_suffix}"),)
    return (LoadBalancerIngress(ip=address, ip_mode=ip_mode(cfg)),)


class OctaviaLoadBalancers:
    def __init__(
        self,
        *,
        client: OpenStackClient,
        settings: LiveSettings,
        provider_settings: ProviderSettings,
        features: CloudFeatures,
        planning: bool = False,
    ) -> None:
        self._args = (client, settings, provider_settings, features)
        # `plan`: every write is recorded, not sent, and a sync goes on past its first
        # write so that the whole difference shows (`plan.py`).
        self._planning = planning
        self._api = Api(client=client)
        self._resolver = Resolver(
            api=self._api,
            settings=settings,
            features=features,
            cluster=provider_settings.cluster_name,
            cluster_id=provider_settings.cluster_id,
        )
        self._cluster = provider_settings.cluster_name
        self._cluster_id = provider_settings.cluster_id
        self._families = Families(api=self._api)
        self._backends = Backends()
        self._verified = Verified()
        self._written = JustWritten()
        self._lock = threading.Lock()  # guards the three below
        # Load balancers this process created, with the fingerprint of the specs they were
        # created from: the sync that finds one ACTIVE with unchanged specs skips re-reading
        # its children (a fully populated create makes all of them or lands in ERROR), and
        # the floating IPs of its brand-new VIP port. Lost on restart, which only costs
        # those reads.
        self._fresh: dict[str, str] = {}
        # Load balancers this process deleted with their Service (`ensure_deleted`): once
        # one is gone, `get` does not look for another by the Service's names (nothing
        # creates one while the Service is being deleted). Lost on restart: two reads.
        self._deleted: set[str] = set()
        # Load balancers named by a Service's id annotation that this process deleted (in
        # ERROR) to replace them: the only missing ones an ensure may create a new load
        # balancer for. Dropped once the replacement is in place; lost on restart, after
        # which the Service's Warning asks for the annotation to be removed.
        self._replacing: set[str] = set()

    # --- LoadBalancers ---------------------------------------------------------------------------
    def get(self, *, service: Service) -> tuple[LoadBalancerIngress, ...] | None:
        cfg = self._resolver.resolve(service, (), a.Events(), lookups=False)
        lb = self._find(cfg, after_delete=True)
        # A load balancer still PENDING_DELETE exists: the service controller removes the
        # finalizer only once it is gone, so a delete that fails (ERROR) is retried, not
        # forgotten with the Service.
        if lb is None or lb.provisioning_status == DELETED or self._foreign(cfg, lb):
            return None
        if cfg.internal or cfg.ip_version == 6:
            return ingress(cfg, lb.vip_address)
        attached = self._api.find(FLOATING_IPS, {"port_id": lb.vip_port_id})
        return ingress(cfg, attached[0].floating_ip_address if attached else lb.vip_address)

    def ensure(self, *, service: Service, nodes: Sequence[Node]) -> LoadBalancerOutcome:
        if not service.spec.ports:
            raise CloudError(f"Service {service.key} has no ports", retryable=False)
        events = a.Events()
        cfg = self._resolver.resolve(service, nodes, events)
        if refusal := cfg.refusal(service):
            raise CloudError(f"{refusal}; no load balancer is created or changed", retryable=False)
        # One config per load balancer, each family's subnet checked before anything is
        # created (a dual-stack pair is never left half-made by a missing subnet).
        served = [
            self._ensure_family(family, service, nodes, events, found)
            for family, found in self._family_lbs(cfg, service, events)
        ]
        first, lb, addresses = served[0]
        if len(served) == 1 and not first.extra_version:
            self._drop_secondary(cfg, service)
        families = [f for f, _, _ in served]
        self._security_groups(events).ensure(families, service, nodes, self._all_choices(families))
        with self._lock:
            # The outcome moves the annotation to `lb`.
            self._replacing.discard(cfg.lb_id)
        entries = [
            e for family, _, found in served for addr in found for e in ingress(family, addr)
        ]
        return LoadBalancerOutcome(
            ingress=tuple(dict.fromkeys(entries)),
            annotations_to_set={a.LOAD_BALANCER_ID: lb.id, a.LOAD_BALANCER_ADDRESS: addresses[0]},
            events=events.all(),
        )

    def _ensure_family(
        self,
        cfg: ServiceConfig,
        service: Service,
        nodes: Sequence[Node],
        events: a.Events,
        found: LoadBalancer | None,
    ) -> tuple[ServiceConfig, LoadBalancer, list[str]]:
        """One load balancer of the Service: (its config, it, the addresses it is reached
        on)."""
        specs = self._specs(cfg, service, nodes, events)
        started = self._verified.now()
        lb, owner = self._usable_lb(cfg, specs, found)
        fresh = self._just_created(lb, specs)
        if not fresh and (kept := self._monitors_kept(cfg, lb, started)) is not cfg:
            cfg, specs = kept, self._specs(kept, service, nodes, events)
        reconciler = self._reconciler(lb.id, cfg, events)
        listeners = None if owner else self._join_shared(cfg, lb, specs, reconciler)
        if not fresh:
            self._reconcile(
                cfg, lb, specs, reconciler, owner=owner, started=started, current=listeners
            )
        if owner:
            self._claim(cfg, lb, reconciler)
        elif cfg.lb_tags:
            events.warn(
                a.INVALID_ANNOTATION,
                f"annotation {a.LOAD_BALANCER_TAGS} ignored: load balancer {lb.id} is shared "
                f"with this Service through {a.LOAD_BALANCER_ID}; only the Service it was "
                "created for tags it",
            )
        return cfg, lb, self._addresses(cfg, lb, owner=owner, events=events, fresh=fresh)

    def _monitors_kept(self, cfg: ServiceConfig, lb: LoadBalancer, started: float) -> ServiceConfig:
        """`cfg`, or with the monitors of the port's protocol when its kube-proxy monitors
        are only the default (`MonitorConfig.yields`) and `lb`'s pools already have such
        monitors (upstream's, an older pyccm's): a load balancer keeps the kind of monitors
        it has, in every pool, new ones too, so a takeover writes no monitor and no member."""
        monitor = cfg.monitor
        if monitor is None or not monitor.yields:
            return cfg
        found = self._verified.port_monitors(lb)
        if found is None:
            found = any(
                (current := self._api.get_or_none(HEALTH_MONITORS, pool.healthmonitor_id))
                is not None
                and current.type in PORT_MONITOR_TYPES
                for pool in self._api.of_lb(POOLS, lb.id)
                if pool.healthmonitor_id
            )
            self._verified.record_port_monitors(lb, found, started=started)
        return dataclasses.replace(cfg, monitor=monitor.port_monitors()) if found else cfg

    def _family_lbs(
        self, cfg: ServiceConfig, service: Service, events: a.Events
    ) -> list[tuple[ServiceConfig, LoadBalancer | None]]:
        """The Service's load balancers to ensure, the first one already looked up. One
        with additional VIPs can only be had by creating it so: an existing load balancer
        without them keeps serving its family, and the other gets its own."""
        configs = self._families.configs(cfg, service, events)
        found = self._find(configs[0])
        if configs[0].extra_version and found is not None and not self._has_extra_vip(found):
            configs = self._families.split(configs[0])
        return [(configs[0], found), *((c, self._find(c)) for c in configs[1:])]

    @staticmethod
    def _has_extra_vip(lb: LoadBalancer) -> bool:
        return lb.provisioning_status in GONE or bool(lb.additional_vips)

    def _drop_secondary(self, cfg: ServiceConfig, service: Service) -> None:
        """A Service that was dual-stack (its status shows two families) and no longer is:
        its second family's load balancer goes. Single-stack Services make no call here."""
        if len(served_versions(service)) < 2:
            return
        self._delete_family(self._secondary_cfg(cfg), a.Events())

    @staticmethod
    def _secondary_cfg(cfg: ServiceConfig) -> ServiceConfig:
        """Enough of the second family's config to find and delete its load balancer."""
        return dataclasses.replace(
            cfg, name=secondary_name(cfg), legacy_name="", lb_id="", bad_lb_id="", secondary=True
        )

    def update(self, *, service: Service, nodes: Sequence[Node]) -> tuple[ProviderEvent, ...]:
        events = a.Events()
        cfg = self._resolver.resolve(service, nodes, events)
        families = self._family_lbs(cfg, service, events)
        for family, lb in families:
            if lb is None or lb.provisioning_status in GONE:
                raise CloudError(f"Service {service.key} has no load balancer yet")
            if holder := self._foreign(family, lb):
                raise self._owned_elsewhere(family, lb, holder)
        configs = []
        for resolved, lb in families:
            assert lb is not None  # checked above
            started = self._verified.now()
            self._require_active(lb)
            family = self._monitors_kept(resolved, lb, started)
            specs = self._specs(family, service, nodes, events)
            self._reconciler(lb.id, family, events).backends(specs)
            configs.append(family)
        self._security_groups(events).update_members(
            configs, service, nodes, self._all_choices(configs)
        )
        return events.all()

    def ensure_deleted(self, *, service: Service) -> tuple[ProviderEvent, ...]:
        events = a.Events()
        cfg = self._resolver.resolve(service, (), events, lookups=False)
        families = [cfg]
        if len(wanted_versions(service)) > 1 or len(served_versions(service)) > 1:
            # A dual-stack Service's second load balancer, if it has one (by name).
            families.append(self._secondary_cfg(cfg))
        for family in families:
            self._delete_family(family, events)  # raises RetryAfter until it is gone
        self._security_groups(events).delete(cfg, service)
        return events.all()

    def _delete_family(self, cfg: ServiceConfig, events: a.Events) -> None:
        """Deletes (or leaves) one load balancer of the Service; returns once it is gone."""
        lb = self._find(cfg, include_deleting=True)
        if lb is None:
            return
        if holder := self._foreign(cfg, lb):
            # Another cluster's load balancer that only shares this Service's name: left
            # alone, and the Service may go (its finalizer is ours, not the load balancer).
            events.warn("LoadBalancerOwnedByAnotherCluster", self._owned_message(cfg, lb, holder))
            return
        if lb.provisioning_status == PENDING_DELETE:
            raise self._api.retry_later(lb.id, "is being deleted")
        if is_pending(lb):
            raise self._api.retry_later(lb.id, f"is {lb.provisioning_status}")
        created_by_us = lb.name.startswith(SERVICE_PREFIX) or lb.name == cfg.legacy_name
        shared = any(is_service_tag(t) and t != cfg.name for t in lb.tags)
        holder = naming.owner_of(lb.tags, lb.description)
        # A load balancer another cluster owns is never deleted here, only left (shared
        # explicitly with `load-balancer-id`).
        if cfg.cluster_id and holder is not None and holder != cfg.cluster_id:
            created_by_us = False
        if created_by_us and not shared:
            self._delete_lb(cfg, lb)  # raises RetryAfter until it is gone
        self._leave_shared(cfg, lb)

    def node_selector(self, *, service: Service) -> NodeSelector:
        return self._resolver.node_selector(service, a.Events())

    # --- finding and creating --------------------------------------------------------------------
    def _find(
        self, cfg: ServiceConfig, *, include_deleting: bool = False, after_delete: bool = False
    ) -> LoadBalancer | None:
        """By the id annotation, else by name, else by the legacy name. An id that names no
        load balancer falls back to the names (a stale id pyccm wrote heals), unless
        `after_delete` and this process deleted it with its Service; only `_usable_lb`
        decides whether nothing found allows a create."""
        if cfg.lb_id:
            lb = self._api.get_or_none(LOADBALANCERS, cfg.lb_id)
            if lb is not None and lb.provisioning_status != DELETED:
                return lb
            if include_deleting:
                return None
            with self._lock:
                if after_delete and cfg.lb_id in self._deleted:
                    return None
            log.info("load balancer %s of %s does not exist; looking by name", cfg.lb_id, cfg.name)
        for name in (cfg.name, cfg.legacy_name):
            if not name:
                continue  # a second family's load balancer has no legacy name
            found = self._api.find(LOADBALANCERS, {"name": name})
            live = [lb for lb in found if lb.provisioning_status not in GONE]
            if len(live) > 1:
                raise CloudError(f"{len(live)} load balancers are named {name}", retryable=False)
            if live:
                return live[0]
            if found:
                # Only deleting ones: report them so nobody creates a second load balancer
                # while the first still holds the name (and its floating IP).
                return found[0]
        return None

    def _usable_lb(
        self, cfg: ServiceConfig, specs: Sequence[ListenerSpec], lb: LoadBalancer | None
    ) -> tuple[LoadBalancer, bool]:
        """An ACTIVE load balancer for the Service (`lb`, what `_find` found; creating it
        first if there is none)."""
        if lb is None:
            self._require_creatable(cfg)
            created, populated = self._create(cfg, specs)
            if populated:
                with self._lock:
                    self._fresh[created.id] = fingerprint(specs)
            log.info("created load balancer %s (%s) for %s", created.id, created.name, cfg.name)
            raise self._api.retry_later(created.id, "was just created")
        owner = self._is_owner(cfg, lb)
        if owner and (holder := self._foreign(cfg, lb)):
            raise self._owned_elsewhere(cfg, lb, holder)
        if lb.provisioning_status in GONE:
            raise self._api.retry_later(lb.id, "(the previous one) is being deleted")
        if lb.provisioning_status == ERROR and owner:
            # Upstream's recovery: delete it; the next sync creates a fresh one.
            log.warning("load balancer %s is in ERROR: deleting it to recreate it", lb.id)
            self._just_created(lb, specs)  # forget it
            self._verified.forget(lb.id)
            if lb.id == cfg.lb_id:
                with self._lock:
                    self._replacing.add(lb.id)
            self._api.delete(LOADBALANCERS, lb.id, lb_id=lb.id, params={"cascade": "true"})
            raise self._api.retry_later(lb.id, "was in ERROR and is being recreated")
        self._require_active(lb)
        return lb, owner

    def _require_creatable(self, cfg: ServiceConfig) -> None:
        """An id annotation naming a load balancer that does not exist (nor one by name)
        is an error, never a reason to create another, unless this process deleted it to
        replace it."""
        with self._lock:
            if not cfg.lb_id or cfg.lb_id in self._replacing:
                return
        raise CloudError(
            f"annotation {a.LOAD_BALANCER_ID} names load balancer {cfg.lb_id}, which does not "
            "exist; no load balancer is created or changed (remove the annotation to let "
            "pyccm create one)",
            retryable=False,
        )

    def _just_created(self, lb: LoadBalancer, specs: Sequence[ListenerSpec]) -> bool:
        with self._lock:
            return self._fresh.pop(lb.id, None) == fingerprint(specs)

    def _reconcile(
        self,
        cfg: ServiceConfig,
        lb: LoadBalancer,
        specs: Sequence[ListenerSpec],
        reconciler: Reconciler,
        *,
        owner: bool,
        started: float,
        current: Sequence[Listener] | None = None,
    ) -> None:
        """The listeners and what hangs off them, read and compared unless `lb` has not
        changed since they last matched these specs (`verified.py`). `current`: its
        listeners, when this sync has just read them."""
        key, print_ = (lb.id, cfg.name), fingerprint(specs)
        if self._verified.unchanged(key, lb, print_):
            return
        reconciler.listeners(specs, owner=owner, current=current)
        if not reconciler.wrote:
            self._verified.record(key, lb, print_, started=started)

    def _specs(
        self, cfg: ServiceConfig, service: Service, nodes: Sequence[Node], events: a.Events
    ) -> list[ListenerSpec]:
        """The listeners; a load balancer serving both families (additional VIPs) has the
        members of both in each pool. Nodes with no address the member choice allows are
        left out and named in a Warning."""
        backends: tuple[Backend, ...] = ()
        for choice in self._choices(cfg):
            members = self._backends.of(nodes, cfg.node_selector, choice)
            backends += members.backends
            if members.left_out:
                shown = ", ".join(members.left_out[:10])
                more = len(members.left_out) - 10
                events.warn(
                    MEMBER_ADDRESS_MISSING,
                    f"{len(members.left_out)} node(s) have no {choice.describe()} and are not "
                    f"members of {cfg.name}: {shown}{f' and {more} more' if more > 0 else ''}"
                    f" ({a.NODE_ADDRESS_TYPE}, {a.MEMBER_SUBNET_ID})",
                )
        return desired_listeners(cfg, service, backends)

    def _all_choices(self, families: Sequence[ServiceConfig]) -> tuple[MemberChoice, ...]:
        if not families[0].manage_security_groups:
            return ()  # only the security groups' member ports need them here
        return tuple(dict.fromkeys(c for cfg in families for c in self._choices(cfg)))

    def _choices(self, cfg: ServiceConfig) -> tuple[MemberChoice, ...]:
        """How each family's member address is chosen: by `node-address-type`, and within a
        configured member subnet's CIDR (the subnet read once per process)."""
        subnets = {
            cfg.ip_version: cfg.member_subnet_id,
            cfg.extra_version: cfg.extra_member_subnet_id,
        }
        choices = []
        for version in cfg.versions:
            cidr = ""
            if cfg.member_subnet_chosen and subnets.get(version):
                subnet = self._families.subnet(subnets[version])
                cidr = subnet.cidr if subnet.ip_version == version else ""
            choices.append(MemberChoice(version, cfg.node_address_type, cidr))
        return tuple(choices)

    def _require_active(self, lb: LoadBalancer) -> None:
        if lb.provisioning_status == ACTIVE:
            self._api.backoff.reset(lb.id)
            self._verified.observe(lb)
            return
        if is_pending(lb):
            raise self._api.retry_later(lb.id, f"is {lb.provisioning_status}")
        raise CloudError(f"load balancer {lb.id} is {lb.provisioning_status}")

    def _create(
        self, cfg: ServiceConfig, specs: Sequence[ListenerSpec]
    ) -> tuple[LoadBalancer, bool]:
        """The fully populated create; (the load balancer, whether it has every child).
        When the cloud's body limit refuses the members, the load balancer is created with
        its listeners, pools and monitors only: the next syncs find the pools short of
        members and fill them (in parts, `batch.py`). A 413 is answered before anything
        is created, so the second POST creates nothing twice."""
        try:
            return self._api.create(LOADBALANCERS, self._create_body(cfg, specs)), not cfg.serial
        except BodyTooLarge:
            if cfg.serial or not any(spec.pool.member_count for spec in specs):
                raise
        log.info("the members of %s are over the body limit: created without them", cfg.name)
        return self._api.create(
            LOADBALANCERS, self._create_body(cfg, specs, with_members=False)
        ), False

    def _create_body(
        self, cfg: ServiceConfig, specs: Sequence[ListenerSpec], *, with_members: bool = True
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"name": cfg.name, "description": cfg.description}
        if cfg.lb_provider:
            body["provider"] = cfg.lb_provider
        if cfg.features.tags:
            body["tags"] = self._lb_tags(cfg)
        elif cfg.cluster_id:
            body["description"] += naming.owner_mark(cfg.cluster_id)
        if cfg.flavor_id:
            body["flavor_id"] = cfg.flavor_id
        if cfg.availability_zone:
            body["availability_zone"] = cfg.availability_zone
        body |= self._vip(cfg)
        if cfg.extra_vip_subnet_id:
            body["additional_vips"] = [{"subnet_id": cfg.extra_vip_subnet_id}]
        if not cfg.serial:
            body["listeners"] = [spec.create_body(with_members=with_members) for spec in specs]
        return body

    @staticmethod
    def _vip(cfg: ServiceConfig) -> dict[str, str]:
        if cfg.vip_port_id:
            return {"vip_port_id": cfg.vip_port_id}
        vip = {"vip_subnet_id": cfg.vip_subnet_id, "vip_network_id": cfg.vip_network_id}
        vip = {k: v for k, v in vip.items() if v}
        if cfg.load_balancer_ip and (cfg.internal or cfg.ip_version == 6):
            vip["vip_address"] = cfg.load_balancer_ip
        return vip

    # --- shared load balancers -------------------------------------------------------------------
    def _join_shared(
        self,
        cfg: ServiceConfig,
        lb: LoadBalancer,
        specs: Sequence[ListenerSpec],
        reconciler: Reconciler,
    ) -> list[Listener] | None:
        """A Service using a load balancer it does not own (`load-balancer-id`). One that
        has not joined it yet is checked for every reason to refuse it, by reads only,
        before its first write, so a refused Service leaves the load balancer as it was
        (no tag taking a `max-shared-lb` slot or keeping the owner's deletion from deleting
        it, no listener, no pool). Then its tag goes on *before* its listeners, so the
        owner's deletion sees the load balancer is shared even if a later sync stops
        half-way. Returns the listeners read for the checks (None when none were)."""
        if not cfg.features.tags:
            raise CloudError(
                f"sharing a load balancer {cfg.features.lacking('tags')}", retryable=False
            )
        if cfg.internal:
            raise CloudError("internal Service cannot share a load balancer", retryable=False)
        if cfg.name in lb.tags:
            return None
        users = [t for t in lb.tags if is_service_tag(t)]
        if len(users) >= cfg.max_shared_lb:
            raise CloudError(
                f"load balancer {lb.id} is already shared by {len(users)} Services "
                f"(max-shared-lb = {cfg.max_shared_lb})",
                retryable=False,
            )
        listeners = self._api.of_lb(LISTENERS, lb.id)
        reconciler.check_conflicts(specs, listeners, owner=False)
        # Its address: only the owner adds a floating IP, so one the load balancer lacks
        # refuses the Service. For a Service that is not the owner this only reads.
        self._addresses(cfg, lb, owner=False, events=a.Events(), fresh=False)
        reconciler.write(
            partial(
                self._api.update,
                LOADBALANCERS,
                lb.id,
                {"tags": [*(t for t in lb.tags if t), cfg.name]},
                lb_id=lb.id,
            )
        )
        return listeners

    def _leave_shared(self, cfg: ServiceConfig, lb: LoadBalancer) -> None:
        """Remove this Service's listeners (and pools) and its tag; the LB stays."""
        reconciler = self._reconciler(lb.id, cfg, a.Events())
        reconciler.delete_listeners(reconciler.owned_listeners(owner=lb.name == cfg.name))
        if cfg.name in lb.tags:
            # An empty list clears them (upstream sends [""] only because gophercloud
            # drops empty lists from its request bodies).
            tags = [t for t in lb.tags if t and t != cfg.name]
            reconciler.write(
                partial(self._api.update, LOADBALANCERS, lb.id, {"tags": tags}, lb_id=lb.id)
            )

    # --- deletion --------------------------------------------------------------------------------
    def _delete_lb(self, cfg: ServiceConfig, lb: LoadBalancer) -> None:
        if not cfg.keep_floatingip:
            self._floating_ips(a.Events()).delete_ours(lb)
        reconciler = self._reconciler(lb.id, cfg, a.Events())
        if not cfg.cascade_delete:
            reconciler.delete_listeners(self._api.of_lb(LISTENERS, lb.id))
            for pool in self._api.of_lb(POOLS, lb.id):
                reconciler.write(partial(self._api.delete, POOLS, pool.id, lb_id=lb.id))
        reconciler.write(
            partial(
                self._api.delete,
                LOADBALANCERS,
                lb.id,
                lb_id=lb.id,
                params={"cascade": "true"} if cfg.cascade_delete else None,
            )
        )
        self._verified.forget(lb.id)
        with self._lock:
            self._deleted.add(lb.id)
        raise self._api.retry_later(lb.id, "is being deleted")

    # --- address ---------------------------------------------------------------------------------
    def _addresses(
        self, cfg: ServiceConfig, lb: LoadBalancer, *, owner: bool, events: a.Events, fresh: bool
    ) -> list[str]:
        """Where `lb` is reached, first family first: its VIP's address, then its additional
        VIP's when it has one (a dual-stack Service on one load balancer)."""
        extra = [v.ip_address for v in lb.additional_vips or () if v.ip_address]
        if not cfg.extra_version or not extra:
            return [self._address(cfg, lb, owner=owner, events=events, fresh=fresh)]
        if cfg.ip_version == 4:
            return [self._address(cfg, lb, owner=owner, events=events, fresh=fresh), extra[0]]
        # IPv6 first: the additional VIP is the IPv4 one, and it gets the floating IP (Neutron
        # puts one on a port's only IPv4 address), as the IPv4 load balancer of a per-family
        # pair does, with no requested address either (loadBalancerIP is the IPv6 VIP's).
        ipv4 = dataclasses.replace(cfg, ip_version=4, load_balancer_ip="")
        public = self._floating_ips(events).address(
            ipv4, lb, owner=owner, fresh=fresh, private=extra[0]
        )
        return [lb.vip_address, public]

    def _address(
        self, cfg: ServiceConfig, lb: LoadBalancer, *, owner: bool, events: a.Events, fresh: bool
    ) -> str:
        if cfg.ip_version == 6:
            # A dual-stack Service's IPv6 load balancer beside its IPv4 one: no warning,
            # that is how the family is served.
            if not cfg.internal and not cfg.secondary:
                events.warn(
                    "LoadBalancerFloatingIPSkipped",
                    "an IPv6 load balancer is reached on its VIP: no floating IP",
                )
            return lb.vip_address
        return self._floating_ips(events).address(cfg, lb, owner=owner, fresh=fresh)

    def _floating_ips(self, events: a.Events) -> FloatingIps:
        return FloatingIps(api=self._api, events=events, cluster_id=self._cluster_id)

    def _security_groups(self, events: a.Events) -> SecurityGroups:
        return SecurityGroups(api=self._api, events=events, cluster_id=self._cluster_id)

    def _reconciler(self, lb_id: str, cfg: ServiceConfig, events: a.Events) -> Reconciler:
        return Reconciler(
            api=self._api,
            lb_id=lb_id,
            cfg=cfg,
            events=events,
            written=self._written,
            one_write=not self._planning,
        )

    # --- ownership (kubernetes/cloud-provider-openstack#3102) -----------------------------------
    @staticmethod
    def _is_owner(cfg: ServiceConfig, lb: LoadBalancer) -> bool:
        """Whether the Service acts as the load balancer's owner (named after it) rather
        than as a user of a shared one. Found by name despite an id annotation, a legacy
        name is this Service's own too."""
        return lb.name == cfg.name or (lb.id != cfg.lb_id and lb.name == cfg.legacy_name)

    def _foreign(self, cfg: ServiceConfig, lb: LoadBalancer) -> str | None:
        """The id of the other cluster that owns `lb`, when this Service would act as its
        owner; None when it is this cluster's, untagged, or only shared with it."""
        if not cfg.cluster_id or not self._is_owner(cfg, lb):
            return None
        holder = naming.owner_of(lb.tags, lb.description)
        return holder if holder is not None and holder != cfg.cluster_id else None

    @staticmethod
    def _owned_message(cfg: ServiceConfig, lb: LoadBalancer, holder: str) -> str:
        return (
            f"load balancer {lb.id} ({lb.name}) belongs to cluster {holder}, not to this "
            f"cluster ({cfg.cluster_id}): pyccm neither updates nor deletes it (two clusters "
            f"share the cluster name {cfg.cluster!r}; give this one another --cluster-name, "
            f"or share the load balancer explicitly with {a.LOAD_BALANCER_ID})"
        )

    def _owned_elsewhere(
        self, cfg: ServiceConfig, lb: LoadBalancer, holder: str
    ) -> OwnedByAnotherCluster:
        return OwnedByAnotherCluster(self._owned_message(cfg, lb, holder), owner=holder)

    @staticmethod
    def _lb_tags(cfg: ServiceConfig) -> list[str]:
        """The tags the Service's own load balancer carries: its name, this cluster's owner
        tag, then the user's `load-balancer-tags` (which can never be one of the first two:
        `Annotations.tags`)."""
        return [t for t in (cfg.name, cfg.owner_tag, *cfg.lb_tags) if t]

    def _claim(self, cfg: ServiceConfig, lb: LoadBalancer, reconciler: Reconciler) -> None:
        """Tags the Service's own load balancer with its name (Octavia 2.5) and this
        cluster's id: an untagged one (upstream's, or from before cluster ids) is adopted
        here, once; from then on no other cluster takes it. Without tags the id goes in
        the description."""
        if cfg.features.tags:
            tags = added_tags(lb.tags, self._lb_tags(cfg))
            if tags is not None:
                if cfg.owner_tag and cfg.owner_tag not in lb.tags:
                    log.info("load balancer %s (%s): adopted by this cluster", lb.id, lb.name)
                reconciler.write(
                    partial(self._api.update, LOADBALANCERS, lb.id, {"tags": tags}, lb_id=lb.id)
                )
        elif cfg.cluster_id and naming.owner_of((), lb.description) is None:
            description = lb.description + naming.owner_mark(cfg.cluster_id)
            reconciler.write(
                partial(
                    self._api.update,
                    LOADBALANCERS,
                    lb.id,
                    lb_id=lb.id,
                    body={"description": description},
                )
            )

    # --- plan and orphans ------------------------------------------------------------------------
    def plan(self, *, service: Service, nodes: Sequence[Node]) -> LoadBalancerPlan:
        """What `ensure` would write now: the same code, run on a client that sends the
        reads and records the writes (`plan.py`)."""
        client, settings, provider_settings, features = self._args
        dry = DryRunClient(client)
        twin = OctaviaLoadBalancers(
            client=dry,
            settings=settings,
            provider_settings=provider_settings,
            features=features,
            planning=True,
        )
        waits = ""
        ingress: tuple[LoadBalancerIngress, ...] = ()
        events: tuple[ProviderEvent, ...] = ()
        try:
            outcome = twin.ensure(service=service, nodes=nodes)
            ingress, events = outcome.ingress, outcome.events
        except RetryAfter as later:
            waits = str(later)
        return LoadBalancerPlan(
            service=service.key,
            changes=planned_changes(dry.writes),
            ingress=ingress,
            events=events,
            waits=waits,
        )

    def owned(self) -> tuple[OwnedResource, ...]:
        return self._inventory().owned()

    def delete_owned(self, resource: OwnedResource) -> None:
        self._inventory().delete(resource)

    def _inventory(self) -> Inventory:
        if not self._cluster_id:
            raise CloudError("no cluster id: give --cluster-id", retryable=False)
        tags = self._resolver.resolve_features().tags
        return Inventory(
            api=self._api,
            cluster=self._cluster,
            cluster_id=self._cluster_id,
            tags=tags,
            floating_ips=self._floating_ips(a.Events()),
            security_groups=self._security_groups(a.Events()),
        )
