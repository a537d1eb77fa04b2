"""The process's connection to the cloud: Keystone through keystoneauth, the services on urllib3.

Two HTTP stacks, each for what it does best (docs/architecture.md#provider-http):

* **keystoneauth** (a `Session` with a v3 identity plugin) authenticates, re-authenticates
  before the token expires, reads the service catalog and discovers Nova's microversions.
  Its requests are few (one token per hour or so, one discovery per service); they go
  through requests, whose transport is the client's throttled adapter.
* **urllib3** carries every call to Nova, Neutron and Octavia: one pool per host, the token
  in a header, nothing else on the way. A call through keystoneauth's `Adapter` costs about
  four times the CPU of the same call on urllib3 (`python -m bench.http_client_cpu`), and
  openstacksdk's proxies are not needed for raw REST: importing openstacksdk costs every
  worker 13 MiB, so it is imported only where `clouds.yaml` is read (`config.py`).

Endpoints, as upstream's gophercloud finds them: Neutron and Octavia at `<catalog root>/v2.0`
(their API has one major version); Nova at its catalog URL when that names a version (it
usually names `/v2.1`), else where its version discovery points for 2.x. Nova's
microversions are discovered once, when a call first needs one (`endpoint_data`).

Proxies: `http_proxy`/`https_proxy`/`no_proxy` from the environment, read once, as requests
read them before.
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

from pyccm.provider.errors import CloudError, ConfigError

if TYPE_CHECKING:
    import requests.adapters
    from keystoneauth1.discover import EndpointData
    from keystoneauth1.session import Session

    from pyccm.provider.openstack.config import GlobalSettings, OpenStackSettings

ServiceType = Literal["compute", "network", "load-balancer"]

# A trailing `/vN` or `/vN.M` (and slash) of a catalog URL: what is left is the service's root.
_VERSION_SUFFIX = re.compile(r"/v\d+(\.\d+)?/?$|/$")
# Neutron and Octavia have one major API version each; gophercloud appends it to the root.
_FIXED_VERSION: Mapping[ServiceType, str] = {"network": "v2.0", "load-balancer": "v2.0"}
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
    """One set of credentials: its Keystone session, endpoints and HTTP pools. Thread-safe.

    Nothing is sent until the first call; `close` drops the pools.
    """

    def __init__(
        self,
        *,
        session: Session,
        interface: str,
        region: str,
        timeout: float,
        tls: Mapping[str, Any],
        user_agent: str,
    ) -> None:
        self.session = session
        self._interface = interface
        self._region = region or None
        self._timeout = urllib3.Timeout(connect=timeout, read=timeout)
        self._tls = dict(tls)
        self._user_agent = user_agent
        self._proxies = urllib.request.getproxies()
        self._lock = threading.Lock()
        self._endpoints: dict[ServiceType, str] = {}
        self._pools: dict[str | None, urllib3.PoolManager] = {}

    # --- Keystone ----------------------------------------------------------------------------
    def auth_headers(self) -> dict[str, str]:
        """The token header; authenticates first when there is no valid token."""
        return dict(self.session.get_auth_headers() or {})

    def invalidate(self) -> None:
        """Forget the token (the cloud refused it): the next call authenticates again."""
        self.session.invalidate()

    def catalog_url(self, service: ServiceType) -> str:
        """The service's URL as the catalog lists it, without version discovery."""
        url = self.session.get_endpoint(
            service_type=service,
            interface=self._interface,
            region_name=self._region,
            skip_discovery=True,
        )
        if not url:
            raise CloudError(f"no {service} endpoint in the service catalog", retryable=False)
        return str(url)

    def service_root(self, service: ServiceType) -> str:
        """The unversioned root of a service (where its version list lives)."""
        return _VERSION_SUFFIX.sub("", self.catalog_url(service)) + "/"

    def endpoint_data(self, service: ServiceType) -> EndpointData | None:
        """The discovered 2.x endpoint of `service` (URL, microversion range)."""
        return self.session.get_endpoint_data(
            service_type=service,
            interface=self._interface,
            region_name=self._region,
            min_version="2",
            max_version="2.latest",
        )

    def endpoint(self, service: ServiceType) -> str:
        """The versioned base URL the service's paths are relative to, found once."""
        with self._lock:
            found = self._endpoints.get(service)
        if found is not None:
            return found
        catalog = self.catalog_url(service)
        if service in _FIXED_VERSION:
            found = _VERSION_SUFFIX.sub("", catalog) + "/" + _FIXED_VERSION[service]
        elif _VERSION_SUFFIX.search(catalog.rstrip("/")):
            found = catalog.rstrip("/")  # Nova's catalog entry names its version (/v2.1)
        else:
            data = self.endpoint_data(service)
            if data is None or not data.url:
                raise CloudError(f"no {service} endpoint in the service catalog", retryable=False)
            found = str(data.url).rstrip("/")
        with self._lock:
            self._endpoints[service] = found
        return found

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
        if proxy and urllib.request.proxy_bypass(host):
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
        self.session.session.close()


def _scheme_and_host(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme, parts.hostname or ""


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


def _check_identity(auth: Mapping[str, str], *, path: object) -> None:
    """What Keystone v3 cannot resolve, refused before any request (ConfigError)."""
    if auth.get("username") and not (auth.get("user_domain_id") or auth.get("user_domain_name")):
        raise ConfigError(
            f"{path}: [Global] username: needs user-domain-name or user-domain-id (or "
            "domain-name / domain-id); a V3 user name is unique only within its domain"
        )
    if auth.get("application_credential_name") and not (
        auth.get("user_id") or auth.get("username")
    ):
        raise ConfigError(
            f"{path}: [Global] application-credential-name: needs user-id, or username with "
            "its domain (or use application-credential-id)"
        )


def identity_plugin(g: GlobalSettings, *, path: object = "cloud.conf") -> Any:
    """The keystoneauth v3 identity plugin `[Global]` describes."""
    from keystoneauth1.identity import v3

    kind, auth = auth_arguments(g)
    _check_identity(auth, path=path)
    plugins: dict[str, Callable[..., Any]] = {
        "v3password": v3.Password,
        "v3token": v3.Token,
        "v3applicationcredential": v3.ApplicationCredential,
    }
    return plugins[kind](**auth)


def _tls(g: GlobalSettings) -> tuple[dict[str, Any], dict[str, Any]]:
    """TLS options for keystoneauth's session and for urllib3's pools."""
    session: dict[str, Any] = {}
    pools: dict[str, Any] = {}
    if g.tls_insecure:
        session["verify"] = False
        pools["cert_reqs"] = "CERT_NONE"
    elif g.ca_file:
        session["verify"] = g.ca_file
        pools["ca_certs"] = g.ca_file
    if g.cert_file:
        session["cert"] = (g.cert_file, g.key_file)
        pools |= {"cert_file": g.cert_file, "key_file": g.key_file}
    return session, pools


def connect(
    *,
    settings: OpenStackSettings,
    version: str,
    user_agent: tuple[str, ...] = (),
    transport: requests.adapters.HTTPAdapter | None = None,
) -> Connection:
    """A Connection for `settings`. No network I/O happens until the first call.

    `transport`: mounted on keystoneauth's HTTP session (the client's throttle).
    """
    from keystoneauth1 import session as ksa_session

    g = settings.global_
    plugin = identity_plugin(g, path=settings.path)
    session_tls, pool_tls = _tls(g)
    tokens = [tuple(token.partition("/")[::2]) for token in user_agent]
    session = ksa_session.Session(
        auth=plugin,
        timeout=settings.metadata.request_timeout,
        app_name="pyccm",
        app_version=version,
        additional_user_agent=[(name, value) for name, value in tokens],
        **session_tls,
    )
    if transport is not None:
        session.session.mount("http://", transport)
        session.session.mount("https://", transport)
    return Connection(
        session=session,
        interface=g.interface,
        region=g.region,
        timeout=settings.metadata.request_timeout,
        tls=pool_tls,
        user_agent=" ".join((f"pyccm/{version}", *user_agent)),
    )
