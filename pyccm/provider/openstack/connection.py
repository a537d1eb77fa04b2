"""The process's connection to the cloud: one urllib3 pool manager, one Keystone token.

Every HTTP request of the provider (Keystone's token, Nova's version document, every call to
Nova, Neutron and Octavia) goes out here, on urllib3 directly: one pool per host, the token
in a header, nothing else on the way (docs/architecture.md#provider-http). keystoneauth and
requests are not used: a call through keystoneauth's `Adapter` costs about three times the
CPU of the same call here (`python -m bench.http_client_cpu`), and they and openstacksdk
cost every worker megabytes of imports; openstacksdk is imported only where `clouds.yaml`
is read (`config.py`). Keystone v3 itself is `keystone.py`.

Endpoints, as upstream's gophercloud finds them: Neutron and Octavia at `<catalog root>/v2.0`
(their API has one major version); Nova at its catalog URL when that names a version (it
usually names `/v2.1`), else at `<root>/v2.1` (Nova's one API since Newton). Nova's highest
microversion is read once, when a call first needs one (`compute_microversion`).

Proxies: `http_proxy`/`https_proxy`/`no_proxy` from the environment, read once at start.
"""

from __future__ import annotations

import re
import threading
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import urllib3

from pyccm.provider.errors import CloudError
from pyccm.provider.openstack.keystone import (
    Keystone,
    check_identity,
    max_microversion,
    request_body,
)

if TYPE_CHECKING:
    from pyccm.provider.openstack.config import GlobalSettings, OpenStackSettings

ServiceType = Literal["compute", "network", "load-balancer"]

# A trailing `/vN` or `/vN.M` (and slash) of a catalog URL: what is left is the service's root.
_VERSION_SUFFIX = re.compile(r"/v\d+(\.\d+)?/?$|/$")
# Each service's API version, appended to its root as gophercloud does (Nova's only when the
# catalog names none).
_API_VERSION: Mapping[ServiceType, str] = {
    "network": "v2.0",
    "load-balancer": "v2.0",
    "compute": "v2.1",
}
# HTTP connections kept per host: above the sync threads a worker is likely to run (the
# benchmark's 50 service syncs overflowed 32 and dropped connections).
POOL_SIZE = 100


@dataclass(frozen=True)
class Answer:
    """One HTTP answer, read whole."""

    status: int
    body: bytes
    headers: Mapping[str, str]


class Connection:
    """One set of credentials: its token, endpoints and HTTP pools. Thread-safe.

    Nothing is sent until the first call; `close` drops the pools. `throttle` is called
    before every request this connection sends itself (Keystone's, Nova's version document);
    the client calls it before each of its own.
    """

    def __init__(
        self,
        *,
        identity: Mapping[str, Any],
        auth_url: str,
        interface: str,
        region: str,
        timeout: float,
        tls: Mapping[str, Any],
        user_agent: str,
        throttle: Callable[[], object] = lambda: None,
    ) -> None:
        self._interface = interface
        self._region = region or None
        self._timeout = urllib3.Timeout(connect=timeout, read=timeout)
        self._tls = dict(tls)
        self._user_agent = user_agent
        self._throttle = throttle
        # `<scheme>_proxy` and `no_proxy` (as "no") from the environment, read once.
        self._proxies = urllib.request.getproxies()
        self._lock = threading.Lock()
        self._endpoints: dict[ServiceType, str] = {}
        self._microversions: dict[ServiceType, tuple[int, int] | None] = {}
        self._pools: dict[str | None, urllib3.PoolManager] = {}
        self.keystone = Keystone(auth_url=auth_url, body=dict(identity), send=self._send)

    # --- Keystone ----------------------------------------------------------------------------
    def auth_headers(self) -> dict[str, str]:
        """The token header; authenticates first when there is no valid token."""
        return {"X-Auth-Token": self.keystone.token().id}

    def invalidate(self) -> None:
        """Forget the token (the cloud refused it): the next call authenticates again."""
        self.keystone.invalidate()

    def catalog_url(self, service: ServiceType) -> str:
        """The service's URL as the catalog lists it."""
        token = self.keystone.token()
        url = token.endpoint(service, interface=self._interface, region=self._region)
        if not url:
            raise CloudError(f"no {service} endpoint in the service catalog", retryable=False)
        return url

    def service_root(self, service: ServiceType) -> str:
        """The unversioned root of a service (where its version list lives)."""
        return _VERSION_SUFFIX.sub("", self.catalog_url(service)) + "/"

    def endpoint(self, service: ServiceType) -> str:
        """The versioned base URL the service's paths are relative to, found once."""
        with self._lock:
            found = self._endpoints.get(service)
        if found is not None:
            return found
        catalog = self.catalog_url(service).rstrip("/")
        if service == "compute" and _VERSION_SUFFIX.search(catalog):
            found = catalog  # Nova's catalog entry names its version (/v2.1)
        else:
            found = _VERSION_SUFFIX.sub("", catalog) + "/" + _API_VERSION[service]
        with self._lock:
            self._endpoints[service] = found
        return found

    def compute_microversion(self) -> tuple[int, int] | None:
        """Nova's highest microversion (its version document), read once; None when it
        offers none. A failure is not remembered: the next call asks again."""
        with self._lock:
            if "compute" in self._microversions:
                return self._microversions["compute"]
        url = self.endpoint("compute") + "/"
        reply = self._send("GET", url, self.auth_headers(), None)
        if reply.status != 200:
            raise CloudError(f"compute version discovery: GET {url} answered HTTP {reply.status}")
        highest = max_microversion(reply.body)
        with self._lock:
            self._microversions["compute"] = highest
        return highest

    def _send(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes | None
    ) -> Answer:
        self._throttle()
        return self.request(method, url, headers=headers, body=body)

    # --- the services ------------------------------------------------------------------------
    def request(
        self, method: str, url: str, *, headers: Mapping[str, str], body: bytes | None
    ) -> Answer:
        """One HTTP request, no retry and no redirect. Raises urllib3's errors or OSError."""
        all_headers = {"User-Agent": self._user_agent, "Accept": "application/json", **headers}
        if body is not None:
            all_headers["Content-Type"] = "application/json"
        response = self._pool(url).request(
            method,
            url,
            body=body,
            headers=all_headers,
            retries=False,
            redirect=False,
            timeout=self._timeout,
            preload_content=True,
        )
        return Answer(status=response.status, body=response.data, headers=response.headers)

    def _pool(self, url: str) -> urllib3.PoolManager:
        scheme, host = _scheme_and_host(url)
        proxy = self._proxies.get(scheme)
        if proxy and bypassed(host, self._proxies.get("no", "")):
            proxy = None
        with self._lock:
            pool = self._pools.get(proxy)
            if pool is None:
                options = {"num_pools": 10, "maxsize": POOL_SIZE, "block": False, **self._tls}
                if proxy:
                    pool = urllib3.ProxyManager(proxy, **options)
                else:
                    pool = urllib3.PoolManager(**options)
                self._pools[proxy] = pool
            return pool

    def close(self) -> None:
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.clear()


def bypassed(host: str, no_proxy: str) -> bool:
    """Whether `no_proxy` (`*`, or comma-separated names, each matching itself and its
    subdomains, a leading dot optional) exempts `host` from the proxy, as urllib reads it."""
    for entry in (e.strip().lstrip(".").lower() for e in no_proxy.split(",")):
        if entry == "*" or (entry and (host == entry or host.endswith("." + entry))):
            return True
    return False


def _scheme_and_host(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower()


# --- building one ------------------------------------------------------------------------------


def _non_empty(**values: str) -> dict[str, str]:
    return {key: value for key, value in values.items() if value}


def auth_arguments(g: GlobalSettings) -> tuple[str, dict[str, str]]:
    """Identity plugin name and arguments for `[Global]`, in upstream's precedence:
    application credential, then trust, then token, then password. `domain-id`/`-name`
    fill the user and project domains that are not set (gophercloud's behaviour)."""
    user_domain = _non_empty(
        user_domain_id=g.user_domain_id or g.domain_id,
        user_domain_name=g.user_domain_name or g.domain_name,
    )
    project = _non_empty(
        project_id=g.tenant_id,
        project_name=g.tenant_name,
        project_domain_id=g.tenant_domain_id or g.domain_id,
        project_domain_name=g.tenant_domain_name or g.domain_name,
    )
    base = {"auth_url": g.auth_url}
    if g.application_credential_secret:
        identity = _non_empty(
            application_credential_id=g.application_credential_id,
            application_credential_name=g.application_credential_name,
            application_credential_secret=g.application_credential_secret,
        )
        if not g.application_credential_id:
            identity |= _non_empty(user_id=g.user_id, username=g.username) | user_domain
        return "v3applicationcredential", base | identity
    if g.trust_id:
        trustee = _non_empty(user_id=g.trustee_id, password=g.trustee_password, trust_id=g.trust_id)
        return "v3password", base | trustee
    if g.token:
        return "v3token", base | {"token": g.token} | project
    user = _non_empty(user_id=g.user_id, username=g.username, password=g.password)
    return "v3password", base | user | user_domain | project


def _tls(g: GlobalSettings) -> dict[str, Any]:
    """urllib3's TLS options for `[Global]`: the system's CAs unless `ca-file` is set."""
    if g.tls_insecure:
        tls: dict[str, Any] = {"cert_reqs": "CERT_NONE"}
    elif g.ca_file:
        tls = {"ca_certs": g.ca_file}
    else:
        tls = {}
    if g.cert_file:
        tls |= {"cert_file": g.cert_file, "key_file": g.key_file}
    return tls


def identity(g: GlobalSettings, *, path: object = "cloud.conf") -> dict[str, Any]:
    """The Keystone v3 token request `[Global]` describes; ConfigError when Keystone could
    not resolve it (before any request)."""
    kind, auth = auth_arguments(g)
    check_identity(auth, path=path)
    return request_body(kind, auth)


def connect(
    *,
    settings: OpenStackSettings,
    version: str,
    user_agent: tuple[str, ...] = (),
    throttle: Callable[[], object] = lambda: None,
) -> Connection:
    """A Connection for `settings`. No network I/O happens until the first call."""
    g = settings.global_
    return Connection(
        identity=identity(g, path=settings.path),
        auth_url=g.auth_url,
        interface=g.interface,
        region=g.region,
        timeout=settings.metadata.request_timeout,
        tls=_tls(g),
        user_agent=" ".join((f"pyccm/{version}", *user_agent)),
        throttle=throttle,
    )
