"""The OpenStack providerID of a Node: `openstack://[<region>]/<server id>` (upstream's form).

Read by the instances (a Node's server) and by the load balancers (a member's server, its
ports' security groups).
"""

from __future__ import annotations

import re

from pyccm.provider.errors import InvalidProviderId

SCHEME = "openstack"
_PROVIDER_ID = re.compile(r"^openstack://([^/]*)/([^/]+)$")


def parse_provider_id(provider_id: str) -> tuple[str, str]:
    """(region, server id) of a providerID; InvalidProviderId when it is not ours."""
    value = provider_id.strip()
    if "://" not in value:
        # A bare UUID, or `<region>/<uuid>` / `/<uuid>` without the scheme.
        value = f"{SCHEME}:///{value}" if "/" not in value else f"{SCHEME}://{value}"
    match = _PROVIDER_ID.match(value)
    if match is None:
        raise InvalidProviderId(
            f"providerID {provider_id!r} is not openstack://[<region>]/<server id>"
        )
    return match.group(1), match.group(2)
