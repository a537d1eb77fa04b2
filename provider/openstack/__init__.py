"""The OpenStack provider: Keystone, Nova, Neutron and Octavia through openstacksdk.

`create_cloud` is the registry's factory (`--cloud-provider openstack`). It reads and
validates `cloud.conf` at once (a bad file is a `ConfigError`, exit code 2) and connects
lazily, on the first cloud call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from provider.interface import Cloud
    from provider.settings import ProviderSettings


def create_cloud(*, settings: ProviderSettings) -> Cloud:
    from provider.errors import NotSupported

    raise NotSupported("the openstack provider is being built")
