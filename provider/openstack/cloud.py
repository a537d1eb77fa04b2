"""The OpenStack `Cloud`: which capabilities this cloud and this `cloud.conf` offer.

* instances: always (Nova and Neutron are required);
* load balancers: unless `[LoadBalancer] enabled = false`; built by
  `provider.openstack.loadbalancer`, which may decline with `NotSupported`;
* routes: only with `[Route] router-id` and a Neutron `extraroute` or `extraroute-atomic`
  extension, as upstream; the extension list is read on first use.
"""

from __future__ import annotations

import logging
import threading

from pyccm.provider.errors import NotSupported
from pyccm.provider.interface import Instances, LoadBalancers, Routes
from pyccm.provider.openstack.client import OpenStackClient
from pyccm.provider.openstack.config import LiveSettings, OpenStackSettings
from pyccm.provider.openstack.features import CloudFeatures
from pyccm.provider.openstack.instances import OpenStackInstances
from pyccm.provider.openstack.routes import OpenStackRoutes
from pyccm.provider.settings import ProviderSettings

log = logging.getLogger(__name__)


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
        self._instances = OpenStackInstances(client=client, settings=settings)
        self._lock = threading.Lock()
        self._routes: OpenStackRoutes | bool | None = False  # False = not decided yet
        self._lbs: LoadBalancers | bool | None = False

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
        )
