"""One Kubernetes API client per process: configuration, QPS limit, raw requests.

Configuration and authentication (a kubeconfig or in-cluster: bearer tokens, token files,
client certificates, exec plugins) and the proxy (the kubeconfig's `proxy-url`, else
HTTPS_PROXY/HTTP_PROXY/NO_PROXY) come from `pyccm.kubeapi.config`; requests go out
through urllib3, one connection pool per client certificate (a new certificate, renewed by
an exec plugin or rotated in its files, gets a new pool and the idle connections of the
old one are closed, so new connections present it), and answers come back as bytes for
msgspec to decode. Every request first takes a token from one bucket
(`--kube-api-qps`/`--kube-api-burst`, 20/30 as upstream's CCM), so no burst of writes can
overload the API server.
"""

from __future__ import annotations

import logging
import re
import ssl
import threading
import urllib.parse
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
import urllib3

from pyccm import __version__
from pyccm.kubeapi.config import Endpoint, load, ssl_context
from pyccm.kubeapi.credentials import ClientCertificate, Identity
from pyccm.kubeapi.errors import Unavailable, from_response
from pyccm.pacing import TokenBucket
from pyccm.proxies import Proxy

log = logging.getLogger(__name__)

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
USER_AGENT = f"pyccm/{__version__}"
# Connections kept per pool: the writer's 8 threads, two watches, the elector and the
# cluster id can all be in flight at once; more are opened when needed and not kept.
POOL_SIZE = 16


@dataclass(frozen=True)
class KubeSettings:
    # Empty means in-cluster configuration (the service account's token and CA).
    kubeconfig: str = ""
    # Upstream CCM's client defaults: lower than kube-controller-manager's 50/100 because
    # the CCM's writes are few and its lists large.
    qps: float = 20.0
    burst: int = 30
    # A request that takes longer than this has failed; watches set their own. An exec
    # credential plugin gets as long.
    request_timeout: float = 30.0
    # Where the kubelet mounts a pod's service account (token, ca.crt), for in-cluster.
    service_account_dir: str = "/var/run/secrets/kubernetes.io/serviceaccount"
    # A token file (in-cluster, or a kubeconfig's tokenFile) is re-read this often, as
    # client-go does: the kubelet rotates a bound token well before it expires.
    token_file_period: float = 60.0


@dataclass(frozen=True)
class _Request:
    method: str
    url: str
    headers: dict[str, str]
    payload: bytes | None
    timeout: float


class KubeClient:
    """Raises `KubeConfigError` (one line, exit 2 in the commands) for a configuration it
    cannot use; exec plugins run on the first request, not here."""

    def __init__(self, *, settings: KubeSettings) -> None:
        config = load(
            kubeconfig=settings.kubeconfig,
            service_account_dir=settings.service_account_dir,
            token_file_period=settings.token_file_period,
            exec_timeout=settings.request_timeout,
        )
        self._endpoint = config.endpoint
        self._credentials = config.credentials
        self._proxy = config.proxy
        self._settings = settings
        self._bucket = TokenBucket(rate=settings.qps, burst=settings.burst)
        self._pools: dict[ClientCertificate | None, urllib3.PoolManager] = {}
        self._pools_lock = threading.Lock()
        self.host: str = config.endpoint.server
        if config.endpoint.insecure and self.host.startswith("https:"):
            _allow_unverified(self.host)
        if config.proxy is not None:
            log.info("reaching %s through the proxy %s", self.host, config.proxy.url)

    def close(self) -> None:
        with self._pools_lock:
            for pool in self._pools.values():
                pool.clear()
            self._pools.clear()

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float | None = None,
    ) -> bytes:
        """One request; returns the body of a 2xx answer or raises a `KubeError`."""
        response = self.open(
            method, path, query=query, body=body, content_type=content_type, timeout=timeout
        )
        try:
            return bytes(response.data)
        finally:
            response.release_conn()

    def open(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float | None = None,
    ) -> urllib3.BaseHTTPResponse:
        """Like `request` but returns the open response, for watch streams."""
        self._bucket.acquire()
        url = self.host + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        headers = {"Accept": JSON, "User-Agent": USER_AGENT}
        payload = None
        if body is not None:
            headers["Content-Type"] = content_type
            payload = body if isinstance(body, bytes) else msgspec.json.encode(body)
        seconds = timeout or self._settings.request_timeout
        request = _Request(method, url, headers, payload, seconds)
        identity = self._credentials.current()
        response = self._send(identity, request)
        if response.status == 401:
            # A credential revoked or rotated early: a refreshable one (an exec plugin, a
            # token file) is renewed, and the request goes once more with it.
            fresh = self._credentials.refresh(identity)
            if fresh != identity:
                response.drain_conn()
                response.release_conn()
                response = self._send(fresh, request)
        if not 200 <= response.status < 300:
            try:
                raise from_response(
                    response.status, response.data, response.headers.get("Retry-After")
                )
            finally:
                response.release_conn()
        return response

    def _send(self, identity: Identity, request: _Request) -> urllib3.BaseHTTPResponse:
        headers = request.headers
        if identity.authorization:
            headers = {**headers, "Authorization": identity.authorization}
        try:
            return self._pool(identity.certificate).request(
                request.method,
                request.url,
                body=request.payload,
                headers=headers,
                timeout=urllib3.Timeout(total=request.timeout),
                preload_content=False,
            )
        except (urllib3.exceptions.HTTPError, OSError) as error:
            path = urllib.parse.urlsplit(request.url).path
            raise Unavailable(f"{request.method} {path}: {_failure(error)}") from error

    def _pool(self, certificate: ClientCertificate | None) -> urllib3.PoolManager:
        """The pool of connections presenting `certificate`; a new certificate (an exec
        plugin's, renewed) gets a new pool and the previous one is closed."""
        with self._pools_lock:
            pool = self._pools.get(certificate)
            if pool is None:
                for old in self._pools.values():
                    old.clear()
                self._pools.clear()
                pool = self._pools[certificate] = _pool_manager(
                    self._endpoint, certificate, self._proxy
                )
            return pool


def _pool_manager(
    endpoint: Endpoint, certificate: ClientCertificate | None, proxy: Proxy | None
) -> urllib3.PoolManager:
    options: dict[str, Any] = {"maxsize": POOL_SIZE}
    context = None
    if endpoint.server.startswith("https:") or (proxy is not None and proxy.scheme == "https"):
        context = ssl_context(endpoint, certificate)
    if endpoint.server.startswith("https:"):
        options["ssl_context"] = context
        options["cert_reqs"] = ssl.CERT_NONE if endpoint.insecure else ssl.CERT_REQUIRED
        if endpoint.tls_server_name:
            options["server_hostname"] = endpoint.tls_server_name
    if proxy is None:
        return urllib3.PoolManager(**options)
    # An https proxy is trusted (and shown the client certificate) as the API server is:
    # client-go's transport uses the one TLS configuration for both.
    return urllib3.ProxyManager(
        proxy.url,
        proxy_headers=proxy.headers,
        proxy_ssl_context=context if proxy.scheme == "https" else None,
        **options,
    )


def _allow_unverified(server: str) -> None:
    """insecure-skip-tls-verify: said once here rather than warned on every request."""
    host = urllib.parse.urlsplit(server).hostname or ""
    log.warning("insecure-skip-tls-verify: the certificate of %s is not verified", server)
    warnings.filterwarnings(
        "ignore",
        message=f"Unverified HTTPS request is being made to host '{re.escape(host)}'",
        category=urllib3.exceptions.InsecureRequestWarning,
    )


def _failure(error: Exception) -> str:
    """What went wrong, in a few words: urllib3 wraps the cause after its retries."""
    cause = error
    if isinstance(error, urllib3.exceptions.MaxRetryError) and error.reason is not None:
        cause = error.reason
    if isinstance(cause, urllib3.exceptions.SSLError | ssl.SSLError):
        return f"TLS: {cause}"
    return type(cause).__name__
