"""Every OpenStack call of a process goes through one `OpenStackClient`.

It owns the process's single openstacksdk `Connection` and adds what upstream lacks
(reference §6, SPEC "Provider"):

* a client-side token bucket shared by every HTTP request of the process, mounted as the
  transport of the Connection's HTTP session, so Keystone re-authentication, version
  discovery and pagination are throttled too (`--cloud-api-qps`, `--cloud-api-burst`);
* 429 and 503 answers honour `Retry-After`: a short wait is taken inline and the request
  repeated (these statuses mean "not processed"), a long one becomes `RetryAfter` so the
  worker requeues the key instead of holding a thread;
* a read (GET) answered 500, 502 or 504 is repeated too, after 0.2 s and then 0.4 s: a
  read changes nothing, so one flaky answer need not fail (and back off) the whole sync;
  writes are never repeated on those statuses (a create may have happened);
* Prometheus metrics per operation with upstream's names
  (`openstack_api_requests_total`, `openstack_api_request_errors_total`,
  `openstack_api_request_duration_seconds`, label `request` = `<resource>_<op>`), one
  observation per HTTP attempt;
* failures mapped to `provider.errors` (404 → `CloudNotFound`, 409 → `CloudConflict`, ...),
  the library's exception chained, and every message scrubbed of the configured secrets;
* every list is read whole: `list_all` follows the `<collection>_links` "next" link that
  Octavia and Nova add when a list passes their page cap (1,000 items by default) and
  Neutron adds when paging is on, so a pool of 1,500 members is never read as 1,000.

Calls are raw REST through the service proxies: the provider decodes exactly the fields it
reads into msgspec structs (docs/architecture.md#style-typed-views), makes exactly the calls
upstream makes (so the call
counts can be compared), and can reach APIs openstacksdk has no method for (the batch
member PUT).
"""

from __future__ import annotations

import email.utils
import functools
import importlib.metadata
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import msgspec
import requests
import requests.adapters
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

from pyccm.protocol.decoding import decode_json
from pyccm.provider.errors import (
    CloudConflict,
    CloudError,
    CloudNotFound,
    ConfigError,
    ProviderError,
    RetryAfter,
)
from pyccm.provider.openstack.sdk import quiet_config_warnings

if TYPE_CHECKING:
    from openstack.connection import Connection

    from pyccm.provider.openstack.config import GlobalSettings, OpenStackSettings
    from pyccm.provider.settings import ProviderSettings

ServiceType = Literal["compute", "network", "load-balancer"]
T = TypeVar("T")
ItemT = TypeVar("ItemT", bound=msgspec.Struct)
Params = Mapping[str, str | int | Iterable[str]] | None

# A Retry-After up to this long is waited for inline; longer ones go back to the worker
# as RetryAfter, so a throttled cloud never pins a sync thread for minutes.
MAX_INLINE_RETRY_WAIT = 5.0
MAX_ATTEMPTS = 3
# HTTP connection pool per host: above the sync threads a worker is likely to run (the
# benchmark's 50 service syncs overflowed 32: urllib3 warned and dropped connections).
POOL_SIZE = 100
_VERSION_SUFFIX = re.compile(r"/v\d+(\.\d+)?/?$|/$")
# A list longer than this many pages is a server that does not advance its marker.
MAX_PAGES = 10_000
_RETRY_STATUSES = frozenset({429, 503})
# Server errors a read is repeated on (its first wait; doubled for the next attempt).
_READ_RETRY_STATUSES = frozenset({500, 502, 504})
READ_RETRY_WAIT = 0.2
_NOT_RETRYABLE = frozenset({400, 401, 403, 405, 413})


class TokenBucket:
    """A thread-safe token bucket: `rate` tokens per second, at most `burst` stored.

    A caller that finds the bucket empty takes a token "on credit" (the balance goes
    negative) and sleeps until it would have been refilled, outside the lock, so waiting
    callers are served in arrival order and never wake up together.
    """

    def __init__(
        self,
        *,
        rate: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("the cloud API rate must be positive and the burst at least 1")
        self._rate = rate
        self._burst = float(burst)
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._stamp = clock()

    def acquire(self) -> float:
        """Take one token, waiting if needed. Returns the time waited (for tests)."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
            self._stamp = now
            self._tokens -= 1.0
            wait = 0.0 if self._tokens >= 0 else -self._tokens / self._rate
        if wait > 0:
            self._sleep(wait)
        return wait


class ThrottledAdapter(requests.adapters.HTTPAdapter):
    """The transport of the Connection's HTTP session: one token per HTTP request."""

    def __init__(self, bucket: TokenBucket) -> None:
        super().__init__(pool_connections=POOL_SIZE, pool_maxsize=POOL_SIZE)
        self._bucket = bucket

    def send(
        self, request: requests.PreparedRequest, *args: Any, **kwargs: Any
    ) -> requests.Response:
        self._bucket.acquire()
        return super().send(request, *args, **kwargs)


class ApiMetrics:
    """Upstream's three OpenStack API metrics, registered in the given registry.

    A process builds one cloud, so registration happens once; a second build in the same
    registry (tests, an in-process demo) shares the first one's collectors instead of
    failing on a duplicate name.
    """

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.requests = _shared(
            registry,
            Counter,
            "openstack_api_requests_total",
            "OpenStack API calls, by operation.",
        )
        self.errors = _shared(
            registry,
            Counter,
            "openstack_api_request_errors_total",
            "OpenStack API calls that failed, by operation.",
        )
        self.duration = _shared(
            registry,
            Histogram,
            "openstack_api_request_duration_seconds",
            "Latency of OpenStack API calls, by operation.",
            buckets=UPSTREAM_API_BUCKETS,
        )

    def observe(self, request: str, seconds: float, *, failed: bool) -> None:
        self.requests.labels(request=request).inc()
        self.duration.labels(request=request).observe(seconds)
        if failed:
            self.errors.labels(request=request).inc()


MetricT = TypeVar("MetricT", Counter, Histogram)

# Upstream sets no buckets on its API histogram, so it has client_golang's DefBuckets (not
# prometheus_client's defaults, which add 0.075, 0.75 and 7.5).
UPSTREAM_API_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def _shared(
    registry: CollectorRegistry, kind: type[MetricT], name: str, doc: str, **options: Any
) -> MetricT:
    try:
        return kind(name, doc, ["request"], registry=registry, **options)
    except ValueError:
        # prometheus_client has no public lookup; its registry keeps collectors by name.
        existing = registry._names_to_collectors.get(name.removesuffix("_total"))
        if not isinstance(existing, kind):
            raise
        return existing


@dataclass(frozen=True)
class Redactor:
    """Replaces every configured secret in a message before it leaves the provider."""

    secrets: tuple[str, ...] = ()

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text


def retry_after_seconds(value: str | None, *, now: float | None = None) -> float | None:
    """`Retry-After` as seconds: delta-seconds or an HTTP date; None when absent or invalid."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def _fault_message(body: bytes) -> str:
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


class OpenStackClient:
    """The process's gateway to OpenStack. Thread-safe; share one per process."""

    def __init__(
        self,
        *,
        connection: Connection,
        bucket: TokenBucket,
        metrics: ApiMetrics,
        redactor: Redactor,
        user_agent: tuple[str, ...] = (),
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._bucket = bucket
        self._user_agent = user_agent
        self._connection = self._prepared(connection)
        self._metrics = metrics
        self._redact = redactor
        self._clock = clock
        self._sleep = sleep
        # openstacksdk builds a proxy on first attribute access, authenticating and
        # discovering versions on the way; build each once, under a lock, on first use.
        self._proxy_lock = threading.Lock()
        self._proxies: dict[ServiceType, Any] = {}

    def _prepared(self, connection: Connection) -> Connection:
        """Throttle every HTTP request of `connection` with the process's bucket and add the
        `--user-agent` tokens, as upstream adds them to its User-Agent."""
        # One adapter per connection, so closing a replaced one leaves the others' pools.
        adapter = ThrottledAdapter(self._bucket)
        http = connection.session.session
        http.mount("http://", adapter)
        http.mount("https://", adapter)
        for token in self._user_agent:
            name, _, version = token.partition("/")
            connection.session.additional_user_agent.append((name, version))
        return connection

    @property
    def connection(self) -> Connection:
        return self._connection

    def close(self) -> None:
        self._connection.close()

    def replace_connection(
        self, connection: Connection, *, secrets: tuple[str, ...], retire_after: float
    ) -> None:
        """Send every call from now on through `connection` (new credentials: it
        authenticates afresh on its first call). An attempt already under way finishes on
        the connection it started on, which is closed `retire_after` seconds later (longer
        than one attempt may last); the attempts after it, retries included, use the new
        one. Error messages stay scrubbed of the old secrets as well as the new ones."""
        prepared = self._prepared(connection)
        with self._proxy_lock:
            retired, self._connection = self._connection, prepared
            self._proxies = {}
        self._redact = Redactor(tuple(dict.fromkeys((*self._redact.secrets, *secrets))))
        closer = threading.Timer(retire_after, retired.close)
        closer.name = "openstack-retired-connection"
        closer.daemon = True
        closer.start()

    def proxy(self, service: ServiceType) -> Any:
        """The openstacksdk proxy (a keystoneauth Adapter) of `service`."""
        from keystoneauth1 import exceptions as ksa_exceptions
        from openstack import exceptions as sdk_exceptions

        with self._proxy_lock:
            if service not in self._proxies:
                attribute = service.replace("-", "_")
                try:
                    self._proxies[service] = getattr(self._connection, attribute)
                except (ksa_exceptions.ClientException, sdk_exceptions.SDKException) as exc:
                    raise self._transport_error(
                        f"{attribute}_connect", "GET", "(discovery)", exc
                    ) from exc
            return self._proxies[service]

    def service_root(self, service: ServiceType) -> str:
        """The unversioned root of a service (where its version list lives): the configured
        endpoint override, else the catalog's URL, found without version discovery."""
        from keystoneauth1 import exceptions as ksa_exceptions

        config = self._connection.config
        try:
            url = config.get_endpoint(service) or self._connection.session.get_endpoint(
                service_type=service,
                interface=config.get_interface(service),
                region_name=config.get_region_name(service),
                skip_discovery=True,
            )
        except ksa_exceptions.EndpointNotFound as exc:
            raise CloudError(
                f"no {service} endpoint in the service catalog", retryable=False
            ) from exc
        except ksa_exceptions.ClientException as exc:
            raise self._transport_error(f"{service}_endpoint", "GET", "(catalog)", exc) from exc
        if not url:
            raise CloudError(f"no {service} endpoint in the service catalog", retryable=False)
        return _VERSION_SUFFIX.sub("", str(url)) + "/"

    def call(
        self,
        service: ServiceType,
        method: str,
        path: str,
        *,
        request: str,
        params: Params = None,
        body: Any = None,
        ok: Iterable[int] = (200,),
        microversion: str | None = None,
    ) -> bytes:
        """One REST call with throttling, Retry-After, metrics and error mapping.

        `path` is relative to the service's versioned endpoint (or an absolute URL);
        `request` is the metric label, `<resource>_<op>`. Returns the response body.
        """
        accepted = frozenset(ok)
        options: dict[str, Any] = {"params": params, "raise_exc": False}
        if body is not None:
            options["json"] = body
        if microversion is not None:
            options["microversion"] = microversion
        for attempt in range(1, MAX_ATTEMPTS + 1):
            response = self._attempt(service, method, path, request=request, options=options)
            if response.status_code in accepted:
                return response.content
            delay = self._retry_delay(response, attempt, method)
            if delay is None:
                raise self._error(request, method, path, response)
            self._sleep(delay)
        raise self._error(request, method, path, response)

    def call_json(
        self, decode_as: type[T], service: ServiceType, method: str, path: str, **kwargs: Any
    ) -> T:
        """`call`, then decode the body into `decode_as` (a msgspec Struct)."""
        content = self.call(service, method, path, **kwargs)
        try:
            return decode_json(content, decode_as)
        except msgspec.DecodeError as exc:
            raise CloudError(f"{kwargs.get('request')}: unexpected response body ({exc})") from exc

    def list_all(
        self,
        item: type[ItemT],
        service: ServiceType,
        path: str,
        *,
        key: str,
        request: str,
        params: Params = None,
        microversion: str | None = None,
    ) -> list[ItemT]:
        """Every item of a collection (`key`: `members`, `servers`, ...), page after page.

        The next page is asked of the same endpoint with the `marker` (and `limit`) of the
        server's "next" link: its host part may be an address only the server knows (a
        proxy's, or the one the request came in on).
        """
        page_type = _page_of(key, item)
        query: dict[str, Any] = dict(params or {})
        items: list[ItemT] = []
        for _ in range(MAX_PAGES):
            page = self.call_json(
                page_type,
                service,
                "GET",
                path,
                request=request,
                params=query,
                microversion=microversion,
            )
            items.extend(getattr(page, key))
            following = _next_page(page.links)
            if following is None:
                return items
            if following.get("marker") in (None, query.get("marker")):
                raise CloudError(f"{request}: the next-page link of {path} does not advance")
            query |= following
        raise CloudError(f"{request}: {path} has more than {MAX_PAGES} pages")

    def _attempt(
        self, service: ServiceType, method: str, path: str, *, request: str, options: dict[str, Any]
    ) -> requests.Response:
        from keystoneauth1 import adapter as ksa_adapter
        from keystoneauth1 import exceptions as ksa_exceptions
        from openstack import exceptions as sdk_exceptions

        started = self._clock()
        try:
            # keystoneauth's Adapter.request on the service proxy: the proxy's endpoint
            # selection without openstacksdk's response cache and stats layer, which pyccm
            # does not use and which warns (RemovedInSDK50Warning) on every new URL.
            response: requests.Response = ksa_adapter.Adapter.request(
                self.proxy(service), path, method, **options
            )
        except (ksa_exceptions.ClientException, sdk_exceptions.SDKException) as exc:
            self._metrics.observe(request, self._clock() - started, failed=True)
            raise self._transport_error(request, method, path, exc) from exc
        failed = response.status_code >= 400
        self._metrics.observe(request, self._clock() - started, failed=failed)
        return response

    def _retry_delay(self, response: requests.Response, attempt: int, method: str) -> float | None:
        """How long to wait before repeating a 429/503 (or a read's 500/502/504), or None
        to give up now."""
        if attempt >= MAX_ATTEMPTS:
            return None
        if method == "GET" and response.status_code in _READ_RETRY_STATUSES:
            return float(READ_RETRY_WAIT * 2 ** (attempt - 1))
        if response.status_code not in _RETRY_STATUSES:
            return None
        advised = retry_after_seconds(response.headers.get("Retry-After"))
        delay = advised if advised is not None else float(2 ** (attempt - 1))
        if delay > MAX_INLINE_RETRY_WAIT:
            raise RetryAfter(
                f"the cloud asked to retry after {delay:.0f}s (HTTP {response.status_code})",
                delay=delay,
            )
        return delay

    def _error(
        self, request: str, method: str, path: str, response: requests.Response
    ) -> ProviderError:
        status = response.status_code
        detail = self._redact(_fault_message(response.content))[:300]
        message = f"{request}: {method} {path} answered HTTP {status}" + (
            f": {detail}" if detail else ""
        )
        if status == 404:
            return CloudNotFound(message)
        if status == 409:
            return CloudConflict(message)
        if status in _RETRY_STATUSES:
            advised = retry_after_seconds(response.headers.get("Retry-After"))
            return RetryAfter(message, delay=advised or 1.0)
        if status == 413:
            # oslo.middleware's default limit (112 KiB) is about 1,000 load-balancer members.
            message += (
                f" (the request body, {len(response.request.body or b'')} bytes, is over the "
                "cloud's limit: raise [oslo_middleware] max_request_body_size)"
            )
        return CloudError(message, status=status, retryable=status not in _NOT_RETRYABLE)

    def _transport_error(self, request: str, method: str, path: str, exc: Exception) -> CloudError:
        detail = self._redact(str(exc))[:300]
        return CloudError(f"{request}: {method} {path} failed: {type(exc).__name__}: {detail}")


# --- pages ----------------------------------------------------------------------------------------


class Link(msgspec.Struct, frozen=True):
    href: str = ""
    rel: str = ""


@functools.cache
def _page_of(key: str, item: type[msgspec.Struct]) -> type[Any]:
    """`{key: [item], key_links: [link]}` as a msgspec Struct, built once per collection."""
    return msgspec.defstruct(
        f"{key}_page",
        [
            (key, list[item]),  # type: ignore[valid-type]
            ("links", list[Link], msgspec.field(default_factory=list, name=f"{key}_links")),
        ],
        frozen=True,
    )


def _next_page(links: list[Link]) -> dict[str, str] | None:
    """`marker` and `limit` (and `page_reverse`) of the "next" link; None on the last page."""
    for link in links:
        if link.rel == "next":
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(link.href).query)
            wanted = ("marker", "limit", "page_reverse")
            return {name: query[name][-1] for name in wanted if name in query}
    return None


# --- building the one Connection ---------------------------------------------------------------


def _non_empty(**values: str) -> dict[str, str]:
    return {key: value for key, value in values.items() if value}


def auth_arguments(g: GlobalSettings) -> tuple[str, dict[str, str]]:
    """keystoneauth plugin name and arguments for `[Global]`, in upstream's precedence:
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


def _tls_arguments(g: GlobalSettings) -> dict[str, Any]:
    tls: dict[str, Any] = {}
    if g.tls_insecure:
        tls["verify"] = False
    elif g.ca_file:
        tls["cacert"] = g.ca_file
    if g.cert_file:
        tls |= {"cert": g.cert_file, "key": g.key_file}
    return tls


def _version() -> str:
    try:
        return importlib.metadata.version("pyccm")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def connect(*, settings: OpenStackSettings) -> Connection:
    """The process's Connection. No network I/O happens until the first call.

    An authentication setting the SDK refuses (a V3 username without its domain, say) is
    the configuration's fault: ConfigError, one line, no secret in it.
    """
    import openstack
    from keystoneauth1 import exceptions as ksa_exceptions
    from openstack import exceptions as sdk_exceptions

    g = settings.global_
    auth_type, auth = auth_arguments(g)
    try:
        with quiet_config_warnings():
            return openstack.connect(
                load_yaml_config=False,
                load_envvars=False,
                app_name="pyccm",
                app_version=_version(),
                auth_type=auth_type,
                auth=auth,
                region_name=g.region or None,
                interface=g.interface,
                api_timeout=settings.metadata.request_timeout,
                **_tls_arguments(g),
            )
    except (ksa_exceptions.OptionError, sdk_exceptions.ConfigException) as exc:
        message = " ".join(Redactor(g.secrets())(str(exc)).split())
        raise ConfigError(f"cloud.conf [Global]: {message}") from None


def build_client(
    *,
    settings: OpenStackSettings,
    provider_settings: ProviderSettings,
    registry: CollectorRegistry = REGISTRY,
    connection: Connection | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> OpenStackClient:
    bucket = TokenBucket(
        rate=provider_settings.cloud_api_qps,
        burst=provider_settings.cloud_api_burst,
        clock=clock,
        sleep=sleep,
    )
    return OpenStackClient(
        connection=connection or connect(settings=settings),
        bucket=bucket,
        metrics=ApiMetrics(registry),
        redactor=Redactor(settings.global_.secrets()),
        user_agent=provider_settings.user_agent,
        clock=clock,
        sleep=sleep,
    )
