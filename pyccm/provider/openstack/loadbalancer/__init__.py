"""Octavia load balancers for `type: LoadBalancer` Services (docs/upstream.md).

The OpenStack cloud calls `build_load_balancers` once, on first use, with the process's
client (every REST call throttled and measured), the `cloud.conf` settings in force (a
`LiveSettings`: a reload swaps them, and each Service's sync reads `[LoadBalancer]` anew),
the process settings (cluster name) and the cloud's feature facts. The implementation lives in
`octavia.py`; the modules beside it each hold one concern (names, annotations, per-Service
configuration, desired objects, reconciliation, floating IPs, security groups, REST calls).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyccm.provider.interface import LoadBalancers
    from pyccm.provider.openstack.common.features import CloudFeatures
    from pyccm.provider.openstack.config import LiveSettings
    from pyccm.provider.openstack.transport.client import OpenStackClient
    from pyccm.provider.settings import ProviderSettings


def build_load_balancers(
    *,
    client: OpenStackClient,
    settings: LiveSettings,
    provider_settings: ProviderSettings,
    features: CloudFeatures,
) -> LoadBalancers:
    from pyccm.provider.openstack.loadbalancer.octavia import OctaviaLoadBalancers

    return OctaviaLoadBalancers(
        client=client,
        settings=settings,
        provider_settings=provider_settings,
        features=features,
    )
