"""`cloud.conf` (and `clouds.yaml`) into one frozen settings object, validated at start.

Upstream-compatible (docs/upstream.md#cloud-conf): the same sections, keys, defaults and
parsing rules (`provider.openstack.gcfg`), unknown keys ignored. Where upstream only warns
about a value that cannot work (an unknown `lb-provider`, an invalid CIDR in
`address-sort-order`) pyccm refuses to start with one line naming the file, section and
key, so a typo is found at deploy time rather than at the first Service. With
`use-clouds = true` the empty `[Global]` values are filled from a `clouds.yaml` entry read by
openstacksdk's loader in a child process (`transport/clouds.py`); values set in `cloud.conf`
win, as upstream.

Credentials live in `GlobalSettings` fields that are excluded from `repr`, so logging a
settings object never prints them.
"""

from __future__ import annotations

import ipaddress
import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from pyccm.provider.errors import ConfigError
from pyccm.provider.openstack.gcfg import IniDocument, Section, parse_ini
from pyccm.provider.openstack.reload import without_values
from pyccm.provider.openstack.transport import child

KNOWN_LB_PROVIDERS = ("amphora", "amphorav2", "f5", "octavia", "ovn")
KNOWN_CONTAINER_STORES = ("barbican", "external")
KNOWN_SEARCH_ORDER = ("configDrive", "metadataService")
# The child that reads clouds.yaml (`clouds.py`): its module and its deadline (it reads
# local files; the time is openstacksdk's import, about a second).
CLOUDS = "pyccm.provider.openstack.transport.clouds"
CLOUDS_DEADLINE = 60.0
# Upstream's HTTP client timeout when `[Metadata] request-timeout` is unset or zero.
DEFAULT_REQUEST_TIMEOUT = 60.0


@dataclass(frozen=True, kw_only=True)
class GlobalSettings:
    """`[Global]`: Keystone v3 authentication and endpoint selection."""

    auth_url: str = ""
    user_id: str = ""
    username: str = ""
    password: str = field(default="", repr=False)
    tenant_id: str = ""
    tenant_name: str = ""
    tenant_domain_id: str = ""
    tenant_domain_name: str = ""
    user_domain_id: str = ""
    user_domain_name: str = ""
    domain_id: str = ""
    domain_name: str = ""
    region: str = ""
    # Catalog interface (`os-endpoint-type`); `interface` says `public` when it is empty.
    endpoint_type: str = ""
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    tls_insecure: bool = False
    token: str = field(default="", repr=False)
    trust_id: str = ""
    trustee_id: str = ""
    trustee_password: str = field(default="", repr=False)
    application_credential_id: str = ""
    application_credential_name: str = ""
    application_credential_secret: str = field(default="", repr=False)
    use_clouds: bool = False
    clouds_file: str = ""
    cloud: str = ""

    @property
    def interface(self) -> str:
        return self.endpoint_type or "public"

    def secrets(self) -> tuple[str, ...]:
        """Every credential value that is set, for redaction of messages."""
        values = (self.password, self.token, self.trustee_password)
        return tuple(v for v in (*values, self.application_credential_secret) if v)


@dataclass(frozen=True, kw_only=True)
class LoadBalancerClass:
    """`[LoadBalancerClass "name"]`, chosen per Service by `loadbalancer.openstack.org/class`.
    Beyond upstream, a class also takes the Octavia provider, flavor and availability zone
    of its load balancers and `monitor-kube-proxy` (else `[LoadBalancer]`'s; the
    annotations still win)."""

    floating_network_id: str = ""
    floating_subnet_id: str = ""
    floating_subnet: str = ""
    floating_subnet_tags: str = ""
    network_id: str = ""
    subnet_id: str = ""
    member_subnet_id: str = ""
    lb_provider: str = ""
    flavor_id: str = ""
    availability_zone: str = ""
    monitor_kube_proxy: bool = True


@dataclass(frozen=True, kw_only=True)
class LoadBalancerSettings:
    """`[LoadBalancer]` with upstream's defaults."""

    enabled: bool = True
    lb_version: str = ""
    subnet_id: str = ""
    member_subnet_id: str = ""
    network_id: str = ""
    floating_network_id: str = ""
    floating_subnet_id: str = ""
    floating_subnet: str = ""
    floating_subnet_tags: str = ""
    lb_method: str = "ROUND_ROBIN"
    lb_provider: str = "amphora"
    create_monitor: bool = False
    # Monitor durations are whole seconds in the Octavia API (upstream truncates).
    monitor_delay: int = 5
    monitor_timeout: int = 3
    monitor_max_retries: int = 1
    monitor_max_retries_down: int = 3
    # Health monitors of externalTrafficPolicy Cluster Services check kube-proxy's
    # `/healthz` on port 10256 of each node (KEP-3836) instead of the Service's port; a
    # class's default is `[LoadBalancer]`'s.
    monitor_kube_proxy: bool = True
    manage_security_groups: bool = False
    internal_lb: bool = False
    node_selector: str = ""
    cascade_delete: bool = True
    flavor_id: str = ""
    availability_zone: str = ""
    enable_ingress_hostname: bool = False
    ingress_hostname_suffix: str = "nip.io"
    default_tls_container_ref: str = ""
    container_store: str = "barbican"
    max_shared_lb: int = 2
    provider_requires_serial_api_calls: bool = False
    classes: Mapping[str, LoadBalancerClass] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class NetworkingSettings:
    """`[Networking]`: which server addresses become which node addresses."""

    ipv6_support_disabled: bool = False
    public_network_names: tuple[str, ...] = ()
    internal_network_names: tuple[str, ...] = ()
    address_sort_order: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()


@dataclass(frozen=True, kw_only=True)
class RouteSettings:
    """`[Route]`: without a router id the route capability is not offered."""

    router_id: str = ""


@dataclass(frozen=True, kw_only=True)
class MetadataSettings:
    """`[Metadata]`: `request_timeout` is the HTTP timeout of every OpenStack call."""

    search_order: tuple[str, ...] = KNOWN_SEARCH_ORDER
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT


@dataclass(frozen=True, kw_only=True)
class OpenStackSettings:
    path: Path
    global_: GlobalSettings = GlobalSettings()
    load_balancer: LoadBalancerSettings = LoadBalancerSettings()
    networking: NetworkingSettings = NetworkingSettings()
    route: RouteSettings = RouteSettings()
    metadata: MetadataSettings = MetadataSettings()
    # `OS_CCM_REGIONAL=true`: providerIDs carry the region (`openstack://<region>/<id>`).
    regional: bool = False
    # Every file these settings were read from: `cloud.conf`, then the clouds.yaml (and
    # secure.yaml) openstacksdk found. A reload watches their content.
    sources: tuple[Path, ...] = field(default=(), compare=False)

    def changed_sections(self, other: OpenStackSettings) -> tuple[str, ...]:
        """The `cloud.conf` sections whose settings differ in `other`, in file order
        (`[Global]` also covers the values it took from clouds.yaml)."""
        lb, other_lb = self.load_balancer, other.load_balancer
        pairs = (
            ("Global", self.global_, other.global_),
            ("LoadBalancer", replace(lb, classes={}), replace(other_lb, classes={})),
            ("LoadBalancerClass", dict(lb.classes), dict(other_lb.classes)),
            ("Networking", self.networking, other.networking),
            ("Route", self.route, other.route),
            ("Metadata", self.metadata, other.metadata),
        )
        return tuple(name for name, mine, theirs in pairs if mine != theirs)


class LiveSettings:
    """The settings in force now, for code that must follow a reload of `cloud.conf`.

    A reload replaces the whole frozen `OpenStackSettings` at once (one reference swap,
    atomic in CPython), so a reader that takes `current` once per sync sees one file's
    settings, never half of the old file and half of the new one.
    """

    def __init__(self, settings: OpenStackSettings) -> None:
        self._current = settings

    @property
    def current(self) -> OpenStackSettings:
        return self._current

    def swap(self, settings: OpenStackSettings) -> OpenStackSettings:
        """Put `settings` in force; returns the ones they replace."""
        previous, self._current = self._current, settings
        return previous


# --- sections ---------------------------------------------------------------------------


def _strings_of(section: Section, cls: type[Any]) -> dict[str, Any]:
    """Read every `str` field of `cls` from the key named like it (underscores → dashes)."""
    return {
        f.name: section.string(f.name.replace("_", "-"), f.default)
        for f in fields(cls)
        if f.type == "str" and isinstance(f.default, str)
    }


def _global(document: IniDocument) -> GlobalSettings:
    section = Section(document, "Global")
    values = _strings_of(section, GlobalSettings)
    values.pop("endpoint_type")
    return GlobalSettings(
        **values,
        endpoint_type=section.string("os-endpoint-type"),
        tls_insecure=section.boolean("tls-insecure", False),
        use_clouds=section.boolean("use-clouds", False),
    )


def _monitor_seconds(section: Section, key: str, default: float) -> int:
    seconds = section.duration(key, default)
    if seconds < 0:
        raise section.error(key, "must not be negative")
    return int(seconds)


def _load_balancer(document: IniDocument) -> LoadBalancerSettings:
    section = Section(document, "LoadBalancer")
    values = _strings_of(section, LoadBalancerSettings)
    kube_proxy = section.boolean("monitor-kube-proxy", True)
    settings = LoadBalancerSettings(
        **values,
        enabled=section.boolean("enabled", True),
        create_monitor=section.boolean("create-monitor", False),
        monitor_delay=_monitor_seconds(section, "monitor-delay", 5),
        monitor_timeout=_monitor_seconds(section, "monitor-timeout", 3),
        monitor_max_retries=section.integer("monitor-max-retries", 1),
        monitor_max_retries_down=section.integer("monitor-max-retries-down", 3),
        monitor_kube_proxy=kube_proxy,
        manage_security_groups=section.boolean("manage-security-groups", False),
        internal_lb=section.boolean("internal-lb", False),
        cascade_delete=section.boolean("cascade-delete", True),
        enable_ingress_hostname=section.boolean("enable-ingress-hostname", False),
        max_shared_lb=section.integer("max-shared-lb", 2),
        provider_requires_serial_api_calls=section.boolean(
            "provider-requires-serial-api-calls", False
        ),
        classes=_classes(document, load_balancer_value=kube_proxy),
    )
    _check_load_balancer(section, settings)
    return settings


def _check_load_balancer(section: Section, settings: LoadBalancerSettings) -> None:
    if settings.lb_version not in ("", "v2"):
        raise section.error("lb-version", f"{settings.lb_version!r} is not supported (only v2)")
    # Empty means "Octavia's default provider", which upstream also accepts.
    if settings.lb_provider and settings.lb_provider not in KNOWN_LB_PROVIDERS:
        known = ", ".join(KNOWN_LB_PROVIDERS)
        raise section.error("lb-provider", f"unknown provider {settings.lb_provider!r} ({known})")
    if settings.container_store not in KNOWN_CONTAINER_STORES:
        known = ", ".join(KNOWN_CONTAINER_STORES)
        raise section.error("container-store", f"{settings.container_store!r} is not {known}")
    if settings.max_shared_lb < 1:
        raise section.error("max-shared-lb", "must be at least 1")


def _classes(document: IniDocument, *, load_balancer_value: bool) -> dict[str, LoadBalancerClass]:
    """`load_balancer_value`: `[LoadBalancer] monitor-kube-proxy`, each class's default."""
    classes = {}
    for name in document.subsections("LoadBalancerClass"):
        section = Section(document, "LoadBalancerClass", name)
        found = LoadBalancerClass(
            **_strings_of(section, LoadBalancerClass),
            monitor_kube_proxy=section.boolean("monitor-kube-proxy", load_balancer_value),
        )
        if found.lb_provider and found.lb_provider not in KNOWN_LB_PROVIDERS:
            known = ", ".join(KNOWN_LB_PROVIDERS)
            raise section.error("lb-provider", f"unknown provider {found.lb_provider!r} ({known})")
        if len(found.availability_zone) > 255:
            raise section.error("availability-zone", "is over 255 characters")
        classes[name] = found
    return classes


def _sort_order(section: Section) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    text = section.string("address-sort-order")
    networks = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise section.error("address-sort-order", f"{item!r} is not a CIDR") from None
    return tuple(networks)


def _networking(document: IniDocument) -> NetworkingSettings:
    section = Section(document, "Networking")
    return NetworkingSettings(
        ipv6_support_disabled=section.boolean("ipv6-support-disabled", False),
        public_network_names=section.strings("public-network-name"),
        internal_network_names=section.strings("internal-network-name"),
        address_sort_order=_sort_order(section),
    )


def _metadata(document: IniDocument) -> MetadataSettings:
    section = Section(document, "Metadata")
    order_text = section.string("search-order", ",".join(KNOWN_SEARCH_ORDER))
    order = tuple(part.strip() for part in order_text.split(",") if part.strip())
    if (
        not 1 <= len(order) <= 2
        or len(set(order)) != len(order)
        or not set(order) <= set(KNOWN_SEARCH_ORDER)
    ):
        raise section.error(
            "search-order", f"{order_text!r} is not configDrive and/or metadataService"
        )
    timeout = section.duration("request-timeout", 0.0)
    if timeout < 0:
        raise section.error("request-timeout", "must not be negative")
    return MetadataSettings(search_order=order, request_timeout=timeout or DEFAULT_REQUEST_TIMEOUT)


# --- clouds.yaml ---------------------------------------------------------------------------

# clouds.yaml `auth` keys → `[Global]` fields they may fill (docs/upstream.md#cloud-conf).
_CLOUDS_AUTH_FIELDS = {
    "auth_url": "auth_url",
    "user_id": "user_id",
    "username": "username",
    "password": "password",
    "project_id": "tenant_id",
    "project_name": "tenant_name",
    "project_domain_id": "tenant_domain_id",
    "project_domain_name": "tenant_domain_name",
    "user_domain_id": "user_domain_id",
    "user_domain_name": "user_domain_name",
    "domain_id": "domain_id",
    "domain_name": "domain_name",
    "application_credential_id": "application_credential_id",
    "application_credential_name": "application_credential_name",
    "application_credential_secret": "application_credential_secret",
    "token": "token",
}
_CLOUDS_TOP_FIELDS = {
    "region_name": "region",
    "interface": "endpoint_type",
    "cacert": "ca_file",
    "cert": "cert_file",
    "key": "key_file",
}


def _read_clouds_yaml(
    settings: GlobalSettings, *, conf_path: Path
) -> tuple[dict[str, Any], tuple[Path, ...]]:
    """The named cloud's entry, as openstacksdk's loader resolves it (in a child process:
    `clouds.py`), and the files it was read from (clouds.yaml and any secure.yaml)."""
    where = f"{conf_path}: [Global] {'clouds-file' if settings.clouds_file else 'cloud'}"
    if settings.clouds_file and not Path(settings.clouds_file).is_file():
        raise ConfigError(f"{where}: {settings.clouds_file} does not exist")
    question = {
        "clouds_file": settings.clouds_file,
        "cloud": settings.cloud,
        "top_level": list(_CLOUDS_TOP_FIELDS),
    }
    try:
        entry = child.ask(CLOUDS, question, deadline=CLOUDS_DEADLINE)
    except child.ChildError as refused:
        raise ConfigError(f"{where}: {refused}") from None
    files = tuple(Path(name) for name in entry.pop("files", ()))
    return entry, files


def merge_clouds_yaml(
    settings: GlobalSettings, *, conf_path: Path
) -> tuple[GlobalSettings, tuple[Path, ...]]:
    """Fill the empty `[Global]` values from clouds.yaml (explicit `cloud.conf` values win);
    also returns the files read."""
    cloud, files = _read_clouds_yaml(settings, conf_path=conf_path)
    auth = cloud.get("auth") or {}
    updates: dict[str, Any] = {}
    for source, target in _CLOUDS_AUTH_FIELDS.items():
        if not getattr(settings, target) and auth.get(source):
            updates[target] = str(auth[source])
    for source, target in _CLOUDS_TOP_FIELDS.items():
        if not getattr(settings, target) and cloud.get(source):
            updates[target] = str(cloud[source])
    return replace(settings, **updates), files


# --- entry point ---------------------------------------------------------------------------


def _read_document(path: Path) -> IniDocument:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: cloud config file does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the cloud config ({type(exc).__name__})") from None
    return parse_ini(text, path=path)


def _check_global(settings: GlobalSettings, *, path: Path) -> None:
    if not settings.auth_url:
        raise ConfigError(f"{path}: [Global] auth-url: required (or use-clouds with a clouds.yaml)")
    try:
        parts = urllib.parse.urlsplit(settings.auth_url)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        valid = False
    if not valid:
        raise ConfigError(f"{path}: [Global] auth-url: not an http:// or https:// URL with a host")
    if bool(settings.cert_file) != bool(settings.key_file):
        raise ConfigError(f"{path}: [Global] cert-file: cert-file and key-file go together")


def load_settings(
    path: Path | None, *, environ: Mapping[str, str] = os.environ
) -> OpenStackSettings:
    """Read and validate `cloud.conf` (and clouds.yaml when asked). Raises ConfigError,
    whose message names the file, line, section and key but never a value of the file: a
    password typed into the wrong key must not reach a log (as at reload)."""
    if path is None:
        raise ConfigError("the openstack provider needs --cloud-config (a cloud.conf file)")
    try:
        return _load_settings(path, environ=environ)
    except ConfigError as error:
        raise ConfigError(without_values(error, path=path)) from None


def _load_settings(path: Path, *, environ: Mapping[str, str]) -> OpenStackSettings:
    document = _read_document(path)
    global_settings = _global(document)
    clouds_files: tuple[Path, ...] = ()
    if global_settings.use_clouds:
        global_settings, clouds_files = merge_clouds_yaml(global_settings, conf_path=path)
    _check_global(global_settings, path=path)
    return OpenStackSettings(
        path=path,
        global_=global_settings,
        load_balancer=_load_balancer(document),
        networking=_networking(document),
        route=RouteSettings(router_id=Section(document, "Route").string("router-id")),
        metadata=_metadata(document),
        regional=environ.get("OS_CCM_REGIONAL", "").lower() == "true",
        sources=(path, *clouds_files),
    )
