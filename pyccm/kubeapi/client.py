"""One Kubernetes API client per process: configuration, QPS limit, raw requests.

Configuration and authentication (kubeconfig or in-cluster, bearer token, client
certificates, exec plugins) come from the `kubernetes` package; requests go out through its
REST layer without its models, and answers come back as bytes for msgspec to decode. Every
request first takes a token from one bucket (`--kube-api-qps`/`--kube-api-burst`, 20/30 as
upstream's CCM), so no burst of writes can overload the API server.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import urllib3

from pyccm.kubeapi.errors import Unavailable, from_response

log = logging.getLogger(__name__)

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


@dataclass(frozen=True)
class KubeSettings:
    # Empty means in-cluster configuration (the service account's token and CA).
    kubeconfig: str = ""
    # Upstream CCM's client defaults: lower than kube-controller-manager's 50/100 because
    # the CCM's writes are few and its lists large.
    qps: float = 20.0
    burst: int = 30
    # A request that takes longer than this has failed; watches set their own.
    request_timeout: float = 30.0


class TokenBucket:
    """A blocking token bucket: `take()` waits until a token is free."""

    def __init__(self, *, qps: float, burst: int) -> None:
        self._qps = qps
        self._burst = float(burst)
        self._tokens = float(burst)
        self._stamp = time.monotonic()
        self._lock = threading.Lock()

    def take(self) -> float:
        """Reserve one token; sleep until it is due. Returns the time waited."""
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._qps)
            self._stamp = now
            self._tokens -= 1.0
            wait = 0.0 if self._tokens >= 0 else -self._tokens / self._qps
        if wait > 0:
            time.sleep(wait)
        return wait


class KubeClient:
    def __init__(self, *, settings: KubeSettings) -> None:
        from kubernetes import client, config

        configuration = client.Configuration()
        if settings.kubeconfig:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=settings.kubeconfig, client_configuration=configuration
            )
        else:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        self._api = client.ApiClient(configuration)
        self._settings = settings
        self._bucket = TokenBucket(qps=settings.qps, burst=settings.burst)
        self.host: str = configuration.host

    def close(self) -> None:
        self._api.close()  # type: ignore[no-untyped-call]

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
        self._bucket.take()
        headers = {"Accept": JSON, "Content-Type": content_type}
        method, url, headers, body, _ = self._api.param_serialize(
            method=method,
            resource_path=path,
            query_params=list((query or {}).items()),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            answer = self._api.call_api(
                method,
                url,
                header_params=headers,
                body=body,
                _request_timeout=timeout or self._settings.request_timeout,
            )
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise Unavailable(f"{method} {path}: {type(error).__name__}") from error
        except Exception as error:  # the client wraps TLS errors in its ApiException
            raise Unavailable(f"{method} {path}: {error}") from error
        response: urllib3.BaseHTTPResponse = answer.response
        if not 200 <= response.status < 300:
            try:
                raise from_response(
                    response.status, response.data, response.headers.get("Retry-After")
                )
            finally:
                response.release_conn()
        return response
