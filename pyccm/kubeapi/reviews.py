"""TokenReview and SubjectAccessReview: delegated authentication and authorization.

The manager's HTTPS port decides who may read `/metrics` the way upstream's
cloud-controller-manager does (k8s.io/apiserver's delegating authenticator and
authorizer): the API server says who a bearer token belongs to (a TokenReview) and whether
that user may `get` the path (a SubjectAccessReview for a non-resource URL). Each review is
one POST, retried on a retryable failure with upstream's webhook backoff (0.5 s, x1.5, 20 %
jitter, 5 attempts) within upstream's 10 s review timeout, and counted in upstream's
`apiserver_delegated_authn_request_total{code}` / `apiserver_delegated_authz_request_total`.

The token travels only in the review's body: it is never logged, never part of an error
message (a failed review names the path and the status code only), never a metric label.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec
from prometheus_client import Counter

from pyccm.kubeapi.client import KubeClient
from pyccm.kubeapi.errors import KubeError, TooManyRequests
from pyccm.pacing import Backoff
from pyccm.protocol.decoding import decode_json

log = logging.getLogger(__name__)
T = TypeVar("T")

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

AUTHN_REQUESTS = Counter(
    "apiserver_delegated_authn_request",
    "TokenReviews sent to the API server, by status code (upstream name).",
    ["code"],
)
AUTHZ_REQUESTS = Counter(
    "apiserver_delegated_authz_request",
    "SubjectAccessReviews sent to the API server, by status code (upstream name).",
    ["code"],
)


class ReviewedUser(msgspec.Struct, frozen=True):
    """Who a token or a client certificate belongs to (authentication.k8s.io/v1 UserInfo)."""

    username: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)


class _TokenReviewStatus(msgspec.Struct, frozen=True):
    authenticated: bool = False
    user: ReviewedUser = msgspec.field(default_factory=ReviewedUser)


class _TokenReview(msgspec.Struct, frozen=True):
    status: _TokenReviewStatus = msgspec.field(default_factory=_TokenReviewStatus)


class _AccessReviewStatus(msgspec.Struct, frozen=True):
    allowed: bool = False
    denied: bool = False


class _AccessReview(msgspec.Struct, frozen=True):
    status: _AccessReviewStatus = msgspec.field(default_factory=_AccessReviewStatus)


@dataclass(frozen=True)
class ReviewSettings:
    # Upstream's TokenAccessReviewTimeout and the authorizer's ClientTimeout: one review,
    # retries included, takes at most this long.
    timeout: float = 10.0
    # Upstream's DefaultAuthWebhookRetryBackoff: 0.5 s, x1.5, 20 % jitter, 5 steps.
    first_backoff: float = 0.5
    backoff_factor: float = 1.5
    jitter: float = 0.2
    attempts: int = 5


class Reviews:
    """The two reviews, through one client (its own QPS bucket, not the writer's)."""

    def __init__(self, *, client: KubeClient, settings: ReviewSettings | None = None) -> None:
        self._client = client
        self._settings = settings or ReviewSettings()

    def close(self) -> None:
        self._client.close()

    def review_token(self, token: str) -> ReviewedUser | None:
        """The token's user, or None when the API server does not know the token."""
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        answer = self._post(TOKEN_REVIEWS, body, _TokenReview, AUTHN_REQUESTS)
        return answer.status.user if answer.status.authenticated else None

    def review_access(self, user: ReviewedUser, *, path: str, verb: str) -> bool:
        """Whether `user` may `verb` the non-resource URL `path`."""
        spec: dict[str, Any] = {
            "user": user.username,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {key: list(values) for key, values in user.extra.items()}
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": spec,
        }
        answer = self._post(ACCESS_REVIEWS, body, _AccessReview, AUTHZ_REQUESTS)
        return answer.status.allowed and not answer.status.denied

    def _post(self, path: str, body: dict[str, Any], kind: type[T], counter: Counter) -> T:
        def post(timeout: float) -> bytes:
            try:
                data = self._client.request("POST", path, body=body, timeout=timeout)
            except KubeError as error:
                counter.labels(code=str(error.code) if error.code else "<error>").inc()
                raise
            counter.labels(code="201").inc()
            return data

        data = with_backoff(post, settings=self._settings, what=f"POST {path}")
        try:
            return decode_json(data, kind)
        except msgspec.DecodeError as error:
            raise KubeError(f"POST {path}: an answer that is no review: {error}") from error


def with_backoff(
    call: Callable[[float], bytes],
    *,
    settings: ReviewSettings,
    what: str,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bytes:
    """`call(timeout)` until it answers, a non-retryable error, the last attempt, or the
    deadline; the last error is raised."""
    deadline = clock() + settings.timeout
    # Capped at the whole review's timeout: a longer pause would end past the deadline anyway.
    backoff = Backoff(
        base=settings.first_backoff,
        factor=settings.backoff_factor,
        cap=settings.timeout,
        jitter=(1.0, 1.0 + settings.jitter),
    )
    for attempt in range(1, settings.attempts + 1):
        try:
            return call(max(deadline - clock(), 0.1))
        except KubeError as error:
            pause = backoff.next()
            if isinstance(error, TooManyRequests):
                pause = max(pause, error.retry_after)
            if not error.retryable or attempt == settings.attempts or clock() + pause >= deadline:
                raise
            log.info("%s failed (%s); retrying in %.1fs", what, error, pause)
            sleep(pause)
    raise AssertionError("unreachable: the last attempt raises")
