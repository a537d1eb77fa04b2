"""What this cloud can do: Octavia's API version and Neutron's extensions, read once.

Upstream reads the Octavia root document once per process and takes the last entry's id
(`v2.27`) as the API version (docs/upstream.md#octavia-features). Here:

* the document is read at the unversioned root of the catalog's load-balancer endpoint,
  found without keystoneauth's version discovery (the real Octavia answers discovery of
  `<root>/v2.0` with a bare JSON string, which keystoneauth cannot read);
* the highest `vX.Y` id wins, whatever the order of the list;
* a failed read (5xx, timeout, 429, an auth error) is **not** remembered: the sync fails
  and is retried, so one transient error never switches features off for the life of the
  process; only an answered but missing or unreadable document (404, not JSON, no version
  ids) settles on "no version" (every gated feature off), logged once.

Neutron extensions decide whether routes are offered and how they are written
(`extraroute-atomic`, `allowed-address-pairs`). Both facts are cached for the life of the
process, like upstream; a restart picks up an upgraded cloud.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from typing import Any

import msgspec

from pyccm.provider.errors import CloudNotFound
from pyccm.provider.openstack.common.resources import ExtensionList
from pyccm.provider.openstack.transport.client import OpenStackClient

log = logging.getLogger(__name__)

_VERSION_ID = re.compile(r"^v(\d+)\.(\d+)$")


@dataclass(frozen=True)
class Gate:
    """A feature Octavia has from API 2.<minor> on (docs/upstream.md#octavia-features)."""

    minor: int
    # How a Warning names it.
    what: str
    # The ovn provider has it too (the other gates are off with ovn, as upstream's).
    ovn: bool = False


GATES = {
    # In every Octavia v2 API (Pike's 2.0 on); off only without a readable version, and
    # with ovn, whose driver refuses members' monitor options.
    "member_monitor_port": Gate(0, "members' monitor_port"),
    "tags": Gate(5, "tags", ovn=True),
    "timeouts": Gate(1, "listener timeouts"),
    "flavors": Gate(6, "flavors"),
    "vip_acl": Gate(12, "listeners' allowed_cidrs"),
    "availability_zones": Gate(14, "availability zones"),
    "http_monitors_on_udp": Gate(16, "HTTP monitors on UDP pools"),
    "sctp": Gate(23, "SCTP listeners and pools", ovn=True),
    "additional_vips": Gate(26, "additional VIPs"),
}


@dataclass(frozen=True)
class OctaviaFeatures:
    """Octavia feature gates by API version; `ovn` turns several off
    (docs/upstream.md#octavia-features)."""

    version: tuple[int, int] | None
    lb_provider: str = "amphora"

    def has(self, feature: str) -> bool:
        gate = GATES[feature]
        if self.version is None or (self.lb_provider == "ovn" and not gate.ovn):
            return False
        return self.version >= (2, gate.minor)

    def lacking(self, feature: str) -> str:
        """Why `feature` is off here, for a Warning or a refusal: the Octavia API version it
        needs and the one this Octavia offers (and the ovn provider when that is why)."""
        gate = GATES[feature]
        offers = (
            f"API {self.version[0]}.{self.version[1]}"
            if self.version
            else "no readable API version"
        )
        if self.version is not None and self.version >= (2, gate.minor):
            return (
                f"needs Octavia API 2.{gate.minor} ({gate.what}) and a provider other than "
                f"ovn; this Octavia offers {offers}, with the ovn provider"
            )
        return f"needs Octavia API 2.{gate.minor} ({gate.what}); this Octavia offers {offers}"

    @property
    def tags(self) -> bool:
        return self.has("tags")

    @property
    def timeouts(self) -> bool:
        return self.has("timeouts")

    @property
    def flavors(self) -> bool:
        return self.has("flavors")

    @property
    def vip_acl(self) -> bool:
        return self.has("vip_acl")

    @property
    def availability_zones(self) -> bool:
        return self.has("availability_zones")

    @property
    def http_monitors_on_udp(self) -> bool:
        return self.has("http_monitors_on_udp")

    @property
    def member_monitor_port(self) -> bool:
        """Members' `monitor_port`: a monitor that checks another port of the node."""
        return self.has("member_monitor_port")

    @property
    def sctp(self) -> bool:
        """SCTP listeners, pools and monitors (the ovn provider serves SCTP too)."""
        return self.has("sctp")

    @property
    def additional_vips(self) -> bool:
        """More than one VIP (one per subnet of the VIP network): a dual-stack Service on
        one load balancer. Off with ovn, like the other gates (not checked against its
        driver)."""
        return self.has("additional_vips")


def parse_version_list(content: bytes) -> tuple[int, int] | None:
    """The highest `vX.Y` id of a version document (`{"versions": [...]}` or `.values`)."""
    try:
        document: Any = msgspec.json.decode(content)
    except msgspec.DecodeError:
        return None
    versions = document.get("versions") if isinstance(document, dict) else None
    if isinstance(versions, dict):
        versions = versions.get("values")
    if not isinstance(versions, list):
        return None
    found = [
        (int(match.group(1)), int(match.group(2)))
        for entry in versions
        if isinstance(entry, dict) and (match := _VERSION_ID.match(str(entry.get("id", ""))))
    ]
    return max(found, default=None)


class CloudFeatures:
    """Lazily read, then cached, feature facts for one client."""

    def __init__(self, client: OpenStackClient) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._extensions: frozenset[str] | None = None
        self._octavia: tuple[int, int] | bool | None = False  # False = not read yet

    def neutron_extensions(self) -> frozenset[str]:
        """Aliases of Neutron's extensions (a CloudError propagates: the caller retries)."""
        with self._lock:
            if self._extensions is None:
                listing = self._client.call_json(
                    ExtensionList, "network", "GET", "/extensions", request="extension_list"
                )
                self._extensions = frozenset(e.alias for e in listing.extensions)
            return self._extensions

    def octavia_version(self) -> tuple[int, int] | None:
        """Octavia's API version from its root document; None when unreadable."""
        with self._lock:
            if self._octavia is False:
                self._octavia = self._read_octavia_version()
            return self._octavia if not isinstance(self._octavia, bool) else None

    def octavia(self, *, lb_provider: str) -> OctaviaFeatures:
        return OctaviaFeatures(version=self.octavia_version(), lb_provider=lb_provider)

    def _read_octavia_version(self) -> tuple[int, int] | None:
        """A CloudError other than 404 propagates (not cached: the caller's sync retries)."""
        root = self._client.service_root("load-balancer")
        try:
            content = self._client.call("load-balancer", "GET", root, request="version_list")
        except CloudNotFound:
            content = b""
        version = parse_version_list(content)
        if version is None:
            log.warning(
                "Octavia has no readable version document at %s: every load-balancer "
                "feature that needs an API version (tags, timeouts, allowed_cidrs, flavors, "
                "availability zones) is off",
                root,
            )
        return version
