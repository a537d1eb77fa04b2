"""Every OpenStack call of a process goes through one `OpenStackClient`.

It owns the process's `Connection` (`connection.py`: one urllib3 pool manager and the
Keystone token) and adds what upstream lacks (docs/architecture.md#provider-http):

* a client-side token bucket (`pyccm.pacing.TokenBucket`) shared by every HTTP request of the
  process: each attempt of a call takes a token, and so do Keystone's requests and Nova's
  version document (`--cloud-api-qps`, `--cloud-api-burst`);
* 429 and 503 answers honour `Retry-After`: a short wait is taken inline and the request
  repeated (these statuses mean "not processed"), a long one becomes `RetryAfter` so the
  worker requeues the key instead of holding a thread;
* a read (GET) answered 500, 502 or 504 is repeated too, after 0.2 s and then 0.4 s: a
  read changes nothing, so one flaky answer need not fail (and back off) the whole sync;
  writes are never repeated on those statuses (a create may have happened);
* a 401 (a token revoked or expired early) authenticates again and repeats the request
  once (as keystoneauth's sessions do);
* Prometheus metrics per operation with upstream's names
  (`openstack_api_requests_total`, `openstack_api_request_errors_total`,
  `openstack_api_request_duration_seconds`, label `request` = `<resource>_<op>`), one
  observation per HTTP attempt;
* failures mapped to `provider.errors` (404 → `CloudNotFound`, 409 → `CloudConflict`, ...),
  the library's exception chained, and every message scrubbed of the configured secrets;
* every list is read whole: `list_all` follows the `<collection>_links` "next" link that
  Octavia and Nova add when a list passes their page cap (1,000 items by default) and
  Neutron adds when paging is on, so a pool of 1,500 members is never read as 1,000.

Calls are raw REST: the provider decodes exactly the fields it reads into msgspec structs
(docs/architecture.md#style-typed-views), makes exactly the calls upstream makes (so the
call counts can be compared), and reaches APIs openstacksdk has no method for (the batch
member PUT).
"""

from __future__ import annotations

import email.utils
import functools
import importlib.metadata
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
import urllib3
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

from pyccm.pacing import TokenBucket
from pyccm.protocol.decoding import decode_json
from pyccm.provider.errors import (
    CloudConflict,
    CloudError,
    CloudNotFound,
    ProviderError,
    RetryAfter,
)
from pyccm.provider.openstack.transport.connection import (
    Answer,
    Connection,
    ServiceType,
    connect,
    fault_message,
    host_of,
)

if TYPE_CHECKING:
    from pyccm.provider.openstack.config import OpenStackSettings
    from pyccm.provider.settings import ProviderSettings

T = TypeVar("T")
ItemT = TypeVar("ItemT", bound=msgspec.Struct)
Params = Mapping[str, str | int | Iterable[str]] | None

# A Retry-After up to this long is waited for inline; longer ones go back to the worker
# as RetryAfter, so a throttled cloud never pins a sync thread for minutes.
MAX_INLINE_RETRY_WAIT = 5.0
MAX_ATTEMPTS = 3
# A list longer than this many pages is a server that does not advance its marker.
MAX_PAGES = 10_000
_RETRY_STATUSES = frozenset({429, 503})
# Server errors a read is repeated on (its first wait; doubled for the next attempt).
_READ_RETRY_STATUSES = frozenset({500, 502, 504})
READ_RETRY_WAIT = 0.2
_NOT_RETRYABLE = frozenset({400, 401, 403, 405, 413})


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

    secrets: tuple[str, ...] = field(default=(), repr=False)

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


class OpenStackClient:
    """The process's gateway to OpenStack. Thread-safe; share one per process."""

    def __init__(
        self,
        *,
        settings: OpenStackSettings,
        bucket: TokenBucket,
        metrics: ApiMetrics,
        user_agent: tuple[str, ...] = (),
        connection: Connection | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._bucket = bucket
        self._user_agent = user_agent
        self._connection = connection or self.connect(settings)
        self._metrics = metrics
        self._redact = Redactor(settings.global_.secrets())
        self._clock = clock
        self._sleep = sleep
        self._swap_lock = threading.Lock()

    def connect(self, settings: OpenStackSettings) -> Connection:
        """A new Connection for `settings`, throttled by this client's bucket (Keystone's
        requests included) and with its `--user-agent` tokens. No network I/O yet."""
        return connect(
            settings=settings,
            version=_version(),
            user_agent=self._user_agent,
            throttle=self._bucket.acquire,
        )

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
        with self._swap_lock:
            retired, self._connection = self._connection, connection
        self._redact = Redactor(tuple(dict.fromkeys((*self._redact.secrets, *secrets))))
        closer = threading.Timer(retire_after, retired.close)
        closer.name = "openstack-retired-connection"
        closer.daemon = True
        closer.start()

    def service_root(self, service: ServiceType) -> str:
        """The unversioned root of a service (where its version list lives): the catalog's
        URL without its version, found without version discovery."""
        return self._keystone(f"{service}_endpoint", self._connection.service_root, service)

    def compute_microversion(self) -> tuple[int, int] | None:
        """Nova's highest microversion (read once), None when it offers none."""
        return self._keystone(
            "compute_connect", lambda _: self._connection.compute_microversion(), "compute"
        )

    def _keystone(self, request: str, step: Callable[[ServiceType], T], service: ServiceType) -> T:
        """A catalog or discovery step, its transport failures mapped like a call's."""
        try:
            return step(service)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise self._transport_error(request, "GET", "(catalog)", exc) from exc
        except CloudError as exc:
            raise self._scrubbed(exc) from None

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
        sent = Request(
            method=method,
            path=path,
            query=_query(params),
            body=None if body is None else msgspec.json.encode(body),
            headers=_microversion_headers(service, microversion),
        )
        for attempt in range(1, MAX_ATTEMPTS + 1):
            response = self._attempt(service, sent, request=request)
            if response.status in accepted:
                return response.body
            delay = self._retry_delay(response, attempt, method)
            if delay is None:
                raise self._error(request, sent, response)
            self._sleep(delay)
        raise self._error(request, sent, response)

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
        """Every item of a collection (`key`: `members`, `servers`, ...), page after page."""
        pages = self.pages(
            item, service, path, key=key, request=request, params=params, microversion=microversion
        )
        return [each for page in pages for each in page]

    def pages(
        self,
        item: type[ItemT],
        service: ServiceType,
        path: str,
        *,
        key: str,
        request: str,
        params: Params = None,
        microversion: str | None = None,
    ) -> Iterator[list[ItemT]]:
        """The items of a collection one page at a time, each as soon as it lands.

        The next page is asked of the same endpoint with the `marker` (and `limit`) of the
        server's "next" link: its host part may be an address only the server knows (a
        proxy's, or the one the request came in on).
        """
        page_type = _page_of(key, item)
        query: dict[str, Any] = dict(params or {})
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
            yield list(getattr(page, key))
            following = _next_page(page.links)
            if following is None:
                return
            if following.get("marker") in (None, query.get("marker")):
                raise CloudError(f"{request}: the next-page link of {path} does not advance")
            query |= following
        raise CloudError(f"{request}: {path} has more than {MAX_PAGES} pages")

    def _attempt(self, service: ServiceType, sent: Request, *, request: str) -> Answer:
        """One HTTP attempt on the current Connection; a 401 (the token expired or was
        revoked early) authenticates again and repeats the request once."""
        connection = self._connection
        started = self._clock()
        url = ""
        try:
            url = sent.url(connection.endpoint(service))
            for fresh_token in (False, True):
                token = connection.token()
                headers = sent.headers | {"X-Auth-Token": token.id}
                self._bucket.acquire()
                response = connection.request(sent.method, url, headers=headers, body=sent.body)
                if response.status != 401 or fresh_token:
                    break
                connection.invalidate(token)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            self._metrics.observe(request, self._clock() - started, failed=True)
            raise self._transport_error(request, sent.method, sent.path, exc, url=url) from exc
        except CloudError as exc:  # Keystone's refusal, or no endpoint in its catalog
            self._metrics.observe(request, self._clock() - started, failed=True)
            raise self._scrubbed(exc) from None
        self._metrics.observe(request, self._clock() - started, failed=response.status >= 400)
        return response

    def _retry_delay(self, response: Answer, attempt: int, method: str) -> float | None:
        """How long to wait before repeating a 429/503 (or a read's 500/502/504), or None
        to give up now."""
        if attempt >= MAX_ATTEMPTS:
            return None
        if method == "GET" and response.status in _READ_RETRY_STATUSES:
            return float(READ_RETRY_WAIT * 2 ** (attempt - 1))
        if response.status not in _RETRY_STATUSES:
            return None
        advised = retry_after_seconds(response.headers.get("Retry-After"))
        delay = advised if advised is not None else float(2 ** (attempt - 1))
        if delay > MAX_INLINE_RETRY_WAIT:
            raise RetryAfter(
                f"the cloud asked to retry after {delay:.0f}s (HTTP {response.status})",
                delay=delay,
            )
        return delay

    def _error(self, request: str, sent: Request, response: Answer) -> ProviderError:
        status = response.status
        detail = self._redact(fault_message(response.body))[:300]
        message = f"{request}: {sent.method} {sent.path} answered HTTP {status}" + (
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
                f" (the request body, {len(sent.body or b'')} bytes, is over the "
                "cloud's limit: raise [oslo_middleware] max_request_body_size)"
            )
        return CloudError(message, status=status, retryable=status not in _NOT_RETRYABLE)

    def _scrubbed(self, error: CloudError) -> CloudError:
        """`error` with the configured secrets out of its message (Keystone's answers are
        quoted in it)."""
        message = self._redact(str(error))
        if message == str(error):
            return error
        return CloudError(message, status=error.status, retryable=error.retryable)

    def _transport_error(
        self, request: str, method: str, path: str, exc: Exception, *, url: str = ""
    ) -> CloudError:
        detail = self._redact(" ".join(str(exc).split()))[:300]
        if isinstance(exc, urllib3.exceptions.SSLError):
            return CloudError(
                f"{request}: TLS with {host_of(url or path)} failed "
                f"({self._connection.tls_description}): {detail}"
            )
        return CloudError(f"{request}: {method} {path} failed: {type(exc).__name__}: {detail}")


@dataclass(frozen=True)
class Request:
    """One call as it goes out on every attempt (the body encoded once)."""

    method: str
    path: str
    query: str
    body: bytes | None
    headers: dict[str, str]

    def url(self, endpoint: str) -> str:
        base = self.path if "://" in self.path else endpoint + self.path
        return f"{base}?{self.query}" if self.query else base


def _query(params: Params) -> str:
    """The query string; a list value repeats its key (`device_id=a&device_id=b`)."""
    if not params:
        return ""
    pairs: list[tuple[str, str]] = []
    for name, value in params.items():
        if isinstance(value, str | int):
            pairs.append((name, str(value)))
        else:
            pairs.extend((name, str(each)) for each in value)
    return urllib.parse.urlencode(pairs)


def _microversion_headers(service: ServiceType, microversion: str | None) -> dict[str, str]:
    if microversion is None:
        return {}
    headers = {"OpenStack-API-Version": f"{service} {microversion}"}
    if service == "compute":
        headers["X-OpenStack-Nova-API-Version"] = microversion
    return headers


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


# --- building the client -----------------------------------------------------------------------


def _version() -> str:
    try:
        return importlib.metadata.version("pyccm")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


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
        settings=settings,
        connection=connection,
        bucket=bucket,
        metrics=ApiMetrics(registry),
        user_agent=provider_settings.user_agent,
        clock=clock,
        sleep=sleep,
    )
