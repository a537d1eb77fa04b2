"""The OpenStack `Cloud`: which capabilities this cloud and this `cloud.conf` offer.

* instances: always (Nova and Neutron are required);
* load balancers: unless `[LoadBalancer] enabled = false`; built by
  `provider.openstack.loadbalancer`, which may decline with `NotSupported`;
* routes: only with `[Route] router-id` and a Neutron `extraroute` or `extraroute-atomic`
  extension, as upstream; the extension list is read on first use.

`reload_config` re-reads `cloud.conf` (and its clouds.yaml) when their content changed
(`provider.openstack.reload`) and puts the new settings in force without a restart:

* `[LoadBalancer]` / `[LoadBalancerClass]`: read anew by every Service's sync
  (`LiveSettings`); `[Networking]` and the region: by every instance call;
* `[Route] router-id`: the routes move to the new router from the next reconcile;
* `[Global]` (credentials, endpoints, TLS) and `[Metadata] request-timeout`: a new
  Connection, hence a new Keystone token, for every call from now on; an
  HTTP attempt already under way finishes on the old one (`OpenStackClient.
  replace_connection`), so no sync is dropped.

What the process decided once stays until it restarts, and the change says so: whether
load balancers and routes are offered at all (`[LoadBalancer] enabled`, a `router-id`
set or emptied), and the facts read from the cloud once (Octavia's version, Neutron's
extensions, the autodetected floating network): pointing a running tree at another cloud
needs a restart. The credentials are not tried at reload: a wrong new password shows up
as failing cloud calls, retried with backoff, as at start.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from pyccm.provider.errors import ConfigError, NotSupported
from pyccm.provider.interface import (
    Capability,
    ConfigChange,
    Instances,
    LoadBalancers,
    RouteOwnership,
    Routes,
)
from pyccm.provider.openstack.common.features import CloudFeatures
from pyccm.provider.openstack.config import LiveSettings, OpenStackSettings, load_settings
from pyccm.provider.openstack.instances.nova import OpenStackInstances
from pyccm.provider.openstack.reload import digest, without_values
from pyccm.provider.openstack.routes.router import OpenStackRoutes
from pyccm.provider.openstack.transport.client import OpenStackClient
from pyccm.provider.settings import ProviderSettings

if TYPE_CHECKING:
    from pyccm.provider.openstack.transport.connection import Connection

log = logging.getLogger(__name__)

# The capability each section configures (the controllers using it look again at once).
SECTION_CAPABILITIES: Mapping[str, Capability] = {
    "LoadBalancer": "load_balancers",
    "LoadBalancerClass": "load_balancers",
    "Networking": "instances",
    "Route": "routes",
}
# The sections a Connection is built from: a change needs a new one.
CONNECTION_SECTIONS = frozenset({"Global", "Metadata"})
# A replaced Connection is closed this long after its last possible attempt began: one
# attempt (`request-timeout`) plus the re-authentication it may need, and a margin.
RETIRE_MARGIN = 5.0


class OpenStackCloud:
    def __init__(
        self,
        *,
        client: OpenStackClient,
        settings: OpenStackSettings,
        provider_settings: ProviderSettings,
    ) -> None:
        self.client = client
        # What a reload of `cloud.conf` swaps: the load balancers read it at every sync.
        self.live = LiveSettings(settings)
        self.provider_settings = provider_settings
        self.features = CloudFeatures(client)
        self._instances = OpenStackInstances(client=client, settings=self.live)
        self._lock = threading.Lock()
        self._routes: OpenStackRoutes | bool | None = False  # False = not decided yet
        self._lbs: LoadBalancers | bool | None = False
        # The content of the files last read by `reload_config`; None: not read yet, so
        # the first reload parses them once (and catches an edit made during start-up).
        self._reload_lock = threading.Lock()
        self._digest: str | None = None

    @property
    def settings(self) -> OpenStackSettings:
        """The `cloud.conf` settings in force now."""
        return self.live.current

    @property
    def name(self) -> str:
        return "openstack"

    def instances(self) -> Instances | None:
        return self._instances

    def load_balancers(self) -> LoadBalancers | None:
        with self._lock:
            if self._lbs is False:
                self._lbs = self._build_load_balancers()
            return None if isinstance(self._lbs, bool) else self._lbs

    def routes(self) -> Routes | None:
        """Raises a CloudError when the extension list cannot be read (the caller retries)."""
        with self._lock:
            if self._routes is False:
                self._routes = self._build_routes()
            return None if isinstance(self._routes, bool) else self._routes

    def close(self) -> None:
        self.client.close()

    # --- reload ------------------------------------------------------------------------------
    def reload_config(self) -> ConfigChange | None:
        """Re-read `cloud.conf` if its files' content changed (`ReloadableCloud`)."""
        with self._reload_lock:
            current = self.live.current
            # Hashed before they are read: an edit landing in between is a new digest at
            # the next call, never a change missed.
            seen = digest(current.sources or (current.path,))
            if seen == self._digest:
                return None
            self._digest = seen
            try:
                new = replace(load_settings(current.path), regional=current.regional)
                sections = current.changed_sections(new)
                connection = (
                    self._connection_for(new) if CONNECTION_SECTIONS & {*sections} else None
                )
            except ConfigError as error:
                secrets = current.global_.secrets()
                raise ConfigError(
                    without_values(error, path=current.path, secrets=secrets)
                ) from None
            if not sections:
                return ConfigChange(source=str(current.path))
            return self._apply(current, new, sections, connection)

    def _connection_for(self, settings: OpenStackSettings) -> Connection:
        """A Connection for the new `[Global]` (no network I/O until its first call)."""
        try:
            return self.client.connect(settings)
        except ConfigError:
            raise
        except Exception as exc:  # anything else the new options break while building it
            raise ConfigError(
                f"{settings.path}: [Global]: the new credentials cannot make a connection "
                f"({type(exc).__name__})"
            ) from None

    def _apply(
        self,
        current: OpenStackSettings,
        new: OpenStackSettings,
        sections: tuple[str, ...],
        connection: Connection | None,
    ) -> ConfigChange:
        need_restart = self._need_restart(current, new)
        self.live.swap(new)
        if connection is not None:
            retire_after = 2 * current.metadata.request_timeout + RETIRE_MARGIN
            self.client.replace_connection(
                connection, secrets=new.global_.secrets(), retire_after=retire_after
            )
        with self._lock:
            routes = self._routes
        if isinstance(routes, OpenStackRoutes) and new.route.router_id:
            routes.retarget(new.route.router_id)
        return ConfigChange(
            source=str(new.path),
            sections=sections,
            capabilities=frozenset(
                SECTION_CAPABILITIES[name] for name in sections if name in SECTION_CAPABILITIES
            ),
            need_restart=need_restart,
        )

    def _need_restart(self, current: OpenStackSettings, new: OpenStackSettings) -> tuple[str, ...]:
        """The changes that would turn a capability on or off: decided once per process."""
        with self._lock:
            lbs_decided, routes_decided = self._lbs is not False, self._routes is not False
        found = []
        if lbs_decided and current.load_balancer.enabled != new.load_balancer.enabled:
            found.append("[LoadBalancer] enabled")
        if routes_decided and bool(current.route.router_id) != bool(new.route.router_id):
            found.append("[Route] router-id")
        return tuple(found)

    def _build_load_balancers(self) -> LoadBalancers | None:
        if not self.settings.load_balancer.enabled:
            log.info("[LoadBalancer] enabled = false: no load balancers")
            return None
        from pyccm.provider.openstack.loadbalancer import build_load_balancers

        try:
            return build_load_balancers(
                client=self.client,
                settings=self.live,
                provider_settings=self.provider_settings,
                features=self.features,
            )
        except NotSupported as exc:
            log.warning("load balancers not offered: %s", exc)
            return None

    def _build_routes(self) -> OpenStackRoutes | None:
        router_id = self.settings.route.router_id
        if not router_id:
            log.info("no [Route] router-id: routes not offered")
            return None
        extensions = self.features.neutron_extensions()
        if not {"extraroute", "extraroute-atomic"} & extensions:
            log.warning("Neutron has no extraroute extension: routes not offered")
            return None
        return OpenStackRoutes(
            client=self.client,
            router_id=router_id,
            atomic="extraroute-atomic" in extensions,
            address_pairs="allowed-address-pairs" in extensions,
            cluster_id=self.provider_settings.cluster_id,
        )

    def route_ownership(self) -> RouteOwnership | None:
        """This cluster's routes on every router tagged for it (`RouteOwningCloud`, for
        `pyccm gc`); None without a router extension. Needs the cluster id."""
        extensions = self.features.neutron_extensions()
        if not {"extraroute", "extraroute-atomic"} & extensions:
            return None
        from pyccm.provider.openstack.routes.ownership import OpenStackRouteOwnership

        return OpenStackRouteOwnership(
            client=self.client,
            cluster_id=self.provider_settings.cluster_id,
            atomic="extraroute-atomic" in extensions,
            address_pairs="allowed-address-pairs" in extensions,
        )
