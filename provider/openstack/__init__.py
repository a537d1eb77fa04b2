"""The OpenStack provider: Keystone, Nova, Neutron and Octavia through openstacksdk.

`create_cloud` is the registry's factory (`--cloud-provider openstack`). It reads and
validates `cloud.conf` at once (a bad file is a `ConfigError`, exit code 2) and builds the
process's one Connection, which authenticates lazily, on the first cloud call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyccm.provider.openstack.cloud import OpenStackCloud
    from pyccm.provider.settings import ProviderSettings


def create_cloud(*, settings: ProviderSettings) -> OpenStackCloud:
    from pyccm.provider.openstack.client import build_client
    from pyccm.provider.openstack.cloud import OpenStackCloud
    from pyccm.provider.openstack.config import load_settings

    openstack_settings = load_settings(settings.cloud_config)
    client = build_client(settings=openstack_settings, provider_settings=settings)
    return OpenStackCloud(client=client, settings=openstack_settings, provider_settings=settings)
