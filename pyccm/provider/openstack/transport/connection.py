"""The process's connection to the cloud: one urllib3 pool manager, one Keystone token.

Every request to Nova, Neutron and Octavia (and Nova's version document) goes out here, on
urllib3 directly: one pool per host, the token in a header, nothing else on the way
(docs/architecture.md#provider-http). The token and the service catalog come from
`keystone.py`, which has keystoneauth1 authenticate in a short-lived child process: the
library's discovery, plugins and catalog, none of its imports resident here.

`[Global]` becomes a keystoneauth1 v3 plugin by upstream's rules (`auth_method`): a trust
first (the trustee's `trustee-id`/`trustee-password`, else `user-id`/`password`, as
Magnum writes it), then a token, then a password, then an application credential;
`domain-id`/`-name` fill the user and project domains that are not set.

Endpoints, as upstream's gophercloud finds them: Neutron and Octavia at `<catalog root>/v2.0`
(their API has one major version); Nova at its catalog URL when that names a version (it
usually names `/v2.1`), else at `<root>/v2.1` (Nova's one API since Newton). Nova's highest
microversion is read once, when a call first needs one (`compute_microversion`).

Proxies: HTTP(S)_PROXY and NO_PROXY from the environment, read once at start by Go's rules
(`pyccm.proxies`, as upstream and client-go); Keystone's requests take the same choice.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
import urllib.parse
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import msgspec
import urllib3

from pyccm import proxies
from pyccm.provider.errors import CloudError, ConfigError
from pyccm.provider.openstack.transport.keystone import CHILD_START, SERVICES, Keystone, Token

if TYPE_CHECKING:
    from pyccm.provider.openstack.config import GlobalSettings, OpenStackSettings

log = logging.getLogger(__name__)

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
    headers: Mapping[str, str] = field(repr=False)


class Connection:
    """One set of credentials: its token, endpoints and HTTP pools. Thread-safe.

    Nothing is sent until the first call; `close` drops the pools. `throttle` is called
    before every request this connection sends itself (an authentication counts as one,
    Nova's version document as one); the client calls it before each of its own.
    """

    def __init__(
        self,
        *,
        keystone: Mapping[str, Any],
        timeout: float,
        tls: Mapping[str, Any],
        user_agent: str,
        throttle: Callable[[], object] = lambda: None,
    ) -> None:
        self._timeout = urllib3.Timeout(connect=timeout, read=timeout)
        self._tls = dict(tls)
        self.tls_description = str(keystone["tls"])
        self._user_agent = user_agent
        self._throttle = throttle
        # HTTP(S)_PROXY and NO_PROXY from the environment, read once, by Go's rules.
        self._proxies = proxies.from_environment()
        self._lock = threading.Lock()
        self._endpoints: dict[ServiceType, str] = {}
        self._microversions: dict[ServiceType, tuple[int, int] | None] = {}
        self._pools: dict[str | None, urllib3.PoolManager] = {}
        auth_url = str(keystone["auth_url"])
        try:
            proxy_map = self._proxy_map(auth_url)
        except CloudError as refused:  # a URL urllib cannot split, or the CGI refusal
            raise ConfigError(f"[Global] auth-url: {refused}") from None
        self.keystone = Keystone(
            question={**keystone, "proxies": proxy_map},
            where=host_of(auth_url),
            deadline=timeout + CHILD_START,
            before=throttle,
        )

    def __repr__(self) -> str:
        return f"Connection({self.keystone!r})"

    # --- Keystone ----------------------------------------------------------------------------
    def token(self) -> Token:
        """The current token; authenticates first when there is no valid one."""
        return self.keystone.token()

    def invalidate(self, token: Token) -> None:
        """The cloud refused `token`: the next call authenticates again (once, however many
        calls were refused it)."""
        self.keystone.invalidate(token)

    def catalog_url(self, service: ServiceType) -> str:
        """The service's URL as the catalog lists it for the configured interface and region."""
        url = self.token().endpoint(service)
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
        self._throttle()
        reply = self.request("GET", url, headers={"X-Auth-Token": self.token().id}, body=None)
        if reply.status != 200:
            raise CloudError(f"compute version discovery: GET {url} answered HTTP {reply.status}")
        highest = max_microversion(reply.body)
        with self._lock:
            self._microversions["compute"] = highest
        return highest

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
        proxy = self._proxy(url)
        key = proxy.url if proxy else None
        with self._lock:
            pool = self._pools.get(key)
            if pool is None:
                options = {"num_pools": 10, "maxsize": POOL_SIZE, "block": False, **self._tls}
                if proxy:
                    pool = urllib3.ProxyManager(proxy.url, proxy_headers=proxy.headers, **options)
                else:
                    pool = urllib3.PoolManager(**options)
                self._pools[key] = pool
            return pool

    def _proxy(self, url: str) -> proxies.Proxy | None:
        try:
            return self._proxies.proxy_for(url)
        except ValueError as refused:  # ProxyRefused, or a URL urllib cannot split
            raise CloudError(f"no request to {host_of(url)}: {refused}", retryable=False) from None

    def _proxy_map(self, url: str) -> dict[str, str]:
        """requests' proxy map for Keystone's URL (the child's session does not read the
        environment): the same choice as the data path's, with the credentials in the URL,
        where requests takes them from."""
        proxy = self._proxy(url)
        if proxy is None:
            return {}
        scheme, _, rest = proxy.url.partition("://")
        if proxy.authorization:
            pair = base64.b64decode(proxy.authorization.removeprefix("Basic ")).decode()
            user, _, password = pair.partition(":")
            quoted = urllib.parse.quote(user, safe="") + ":" + urllib.parse.quote(password, safe="")
            rest = f"{quoted}@{rest}"
        return {_scheme_and_host(url)[0]: f"{scheme}://{rest}"}

    def close(self) -> None:
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.clear()


def _scheme_and_host(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower()


def host_of(url: str) -> str:
    """`host:port` of a URL (never its user info)."""
    try:
        netloc = urllib.parse.urlsplit(url).netloc
    except ValueError:  # an address urllib cannot split: the part after "//"
        netloc = url.partition("//")[2].partition("/")[0]
    return netloc.rpartition("@")[2] or url


# --- building one ------------------------------------------------------------------------------


def _non_empty(**values: str) -> dict[str, str]:
    return {key: value for key, value in values.items() if value}


def auth_method(g: GlobalSettings, *, path: object = "cloud.conf") -> tuple[str, dict[str, str]]:
    """The keystoneauth1 v3 plugin (`password`, `token`, `application_credential`) and its
    arguments for `[Global]`, in upstream's precedence (module docstring). ConfigError for
    what Keystone could not resolve, before any request."""
    where = f"{path}: [Global]"
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
    if g.trust_id:
        user_id, password = g.trustee_id or g.user_id, g.trustee_password or g.password
        if not password or not (user_id or g.username):
            raise ConfigError(
                f"{where} trust-id: needs trustee-id and trustee-password (or user-id and password)"
            )
        trustee = _user(user_id, g.username, user_domain, where=where)
        return "password", trustee | {"password": password, "trust_id": g.trust_id}
    if g.token:
        return "token", {"token": g.token} | project
    if g.password:
        user = _user(g.user_id, g.username, user_domain, where=where)
        return "password", user | {"password": g.password} | project
    if g.application_credential_secret:
        if g.application_credential_id:
            credential = {"application_credential_id": g.application_credential_id}
        elif g.application_credential_name:
            if not (g.user_id or g.username):
                raise ConfigError(
                    f"{where} application-credential-name: needs user-id, or username with "
                    "its domain (or use application-credential-id)"
                )
            credential = {"application_credential_name": g.application_credential_name}
            credential |= _user(g.user_id, g.username, user_domain, where=where)
        else:
            raise ConfigError(
                f"{where} application-credential-secret: needs application-credential-id "
                "or application-credential-name"
            )
        return "application_credential", credential | {
            "application_credential_secret": g.application_credential_secret
        }
    raise ConfigError(
        f"{where} password: needs a value (with user-id or username); or set token, "
        "application-credential-secret or trust-id: no credentials are configured"
    )


def _user(user_id: str, username: str, domain: dict[str, str], *, where: str) -> dict[str, str]:
    """A user by id, else by name within its domain (a v3 name is unique only there)."""
    if user_id:
        return {"user_id": user_id}
    if not domain:
        raise ConfigError(
            f"{where} username: needs user-domain-name or user-domain-id (or domain-name / "
            "domain-id); a V3 user name is unique only within its domain"
        )
    return {"username": username} | domain


def _verify(g: GlobalSettings) -> bool | str:
    """What verifies the cloud's certificates: nothing (`tls-insecure`), `ca-file`, or the
    system's CAs."""
    if g.tls_insecure:
        return False
    return g.ca_file or True


def tls_description(g: GlobalSettings) -> str:
    """What verifies the cloud's certificates, and the client certificate, for messages."""
    verify = _verify(g)
    if verify is False:
        trust = "tls-insecure: nothing verified"
    elif isinstance(verify, str):
        trust = f"ca-file {verify}"
    else:
        trust = "the system's CA store: no ca-file"
    client = f"client certificate {g.cert_file}" if g.cert_file else "no client certificate"
    return f"{trust}; {client}"


def _tls(g: GlobalSettings) -> dict[str, Any]:
    """urllib3's TLS options for `[Global]`."""
    verify = _verify(g)
    if verify is False:
        tls: dict[str, Any] = {"cert_reqs": "CERT_NONE"}
    elif isinstance(verify, str):
        tls = {"ca_certs": verify}
    else:
        tls = {}
    if g.cert_file:
        tls |= {"cert_file": g.cert_file, "key_file": g.key_file}
    return tls


def keystone_question(
    g: GlobalSettings, *, path: object, timeout: float, user_agent: str
) -> dict[str, Any]:
    """What the authentication child gets (`authenticate.py`), credentials included."""
    method, options = auth_method(g, path=path)
    return {
        "auth_url": g.auth_url,
        "method": method,
        "options": options,
        "interface": g.interface.removesuffix("URL"),
        "region": g.region or None,
        "services": list(SERVICES),
        "verify": _verify(g),
        "tls": tls_description(g),
        "cert": [g.cert_file, g.key_file] if g.cert_file else None,
        "timeout": timeout,
        "user_agent": user_agent,
    }


def connect(
    *,
    settings: OpenStackSettings,
    version: str,
    user_agent: tuple[str, ...] = (),
    throttle: Callable[[], object] = lambda: None,
) -> Connection:
    """A Connection for `settings`. No network I/O happens until the first call."""
    g = settings.global_
    agent = " ".join((f"pyccm/{version}", *user_agent))
    timeout = settings.metadata.request_timeout
    if g.tls_insecure:
        log.warning(
            "%s: [Global] tls-insecure = true: the certificates of Keystone and of the "
            "catalog's endpoints are not verified",
            settings.path,
        )
        # Said here, once per connection; not again by urllib3 on every request.
        warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
    return Connection(
        keystone=keystone_question(g, path=settings.path, timeout=timeout, user_agent=agent),
        timeout=timeout,
        tls=_tls(g),
        user_agent=agent,
        throttle=throttle,
    )


# --- Nova's version document, error bodies ---------------------------------------------------


def max_microversion(body: bytes) -> tuple[int, int] | None:
    """The highest microversion of a Nova version document; None if it offers none."""
    try:
        version = msgspec.json.decode(body, type=_VersionAnswer).version.version
    except msgspec.DecodeError:
        return None
    major, _, minor = version.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        return None
    return int(major), int(minor)


class _VersionDocument(msgspec.Struct, frozen=True):
    id: str = ""
    version: str = ""


class _VersionAnswer(msgspec.Struct, frozen=True):
    version: _VersionDocument


def fault_message(body: bytes) -> str:
    """The human part of an OpenStack error body (Nova, Neutron, Octavia, Keystone shapes)."""
    try:
        document = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return ""
    if not isinstance(document, dict):
        return ""
    if isinstance(document.get("faultstring"), str):
        return str(document["faultstring"])
    for value in document.values():
        if isinstance(value, dict) and isinstance(value.get("message"), str):
            return str(value["message"])
    return ""
