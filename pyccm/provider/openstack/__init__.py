"""The OpenStack provider: Keystone, Nova, Neutron and Octavia, raw REST on urllib3.

`create_cloud` is the registry's factory (`--cloud-provider openstack`). It reads and
validates `cloud.conf` at once (a bad file is a `ConfigError`, exit code 2) and builds the
process's one Connection, which authenticates lazily, on the first cloud call.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from pyccm.provider.openstack.cloud import OpenStackCloud
    from pyccm.provider.settings import ProviderSettings


def create_cloud(
    *,
    settings: ProviderSettings,
    registry: CollectorRegistry | None = None,
    environ: Mapping[str, str] = os.environ,
) -> OpenStackCloud:
    """`registry`: where the client's metrics go (the process's default registry unless
    given: a bench or test building several clouds gives each its own); `environ`: the
    environment `cloud.conf` is read with (`OS_CCM_REGIONAL`)."""
    from prometheus_client import REGISTRY

    from pyccm.provider.openstack.cloud import OpenStackCloud
    from pyccm.provider.openstack.config import load_settings
    from pyccm.provider.openstack.transport.client import build_client

    openstack_settings = load_settings(settings.cloud_config, environ=environ)
    client = build_client(
        settings=openstack_settings,
        provider_settings=settings,
        registry=REGISTRY if registry is None else registry,
    )
    return OpenStackCloud(client=client, settings=openstack_settings, provider_settings=settings)
