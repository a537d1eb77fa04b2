"""Octavia load balancers for `type: LoadBalancer` Services (reference §3).

The place for the `LoadBalancers` implementation, built separately. The OpenStack cloud
calls `build_load_balancers` once, on first use; it receives the process's client (every
REST call, throttled and measured: `client.call` / `client.call_json`, including the raw
batch-member PUT), the parsed `cloud.conf` (`settings.load_balancer`, with its
`[LoadBalancerClass "x"]` sections in `.classes`), the process settings (cluster name) and
the cloud's feature facts (`features.octavia(lb_provider=...)` for the version gates).
Until it is implemented it raises `NotSupported`, so the OpenStack cloud offers no load
balancers and the service worker idles, as upstream does with `enabled = false`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from provider.errors import NotSupported

if TYPE_CHECKING:
    from provider.interface import LoadBalancers
    from provider.openstack.client import OpenStackClient
    from provider.openstack.config import OpenStackSettings
    from provider.openstack.features import CloudFeatures
    from provider.settings import ProviderSettings


def build_load_balancers(
    *,
    client: OpenStackClient,
    settings: OpenStackSettings,
    provider_settings: ProviderSettings,
    features: CloudFeatures,
) -> LoadBalancers:
    raise NotSupported("the Octavia load balancer implementation is not built yet")
