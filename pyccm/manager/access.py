"""Who may read what on the secure port: delegated authentication and authorization.

The order is upstream's (k8s.io/apiserver's filters, delegating mode):

1. a path in `--authorization-always-allow-paths` (`/healthz,/readyz,/livez`; a trailing
   `*` matches a prefix) is served to anyone, token or not, so the kubelet's probes need
   no credentials and cost the API server nothing;
2. otherwise the request must authenticate: a client certificate signed by
   `--client-ca-file`, or a bearer token the API server knows (a TokenReview); else 401;
3. a member of `system:masters` is then allowed without asking (upstream's
   AlwaysAllowGroups); anyone else only if the API server says so (a SubjectAccessReview
   for the path and the lowercase HTTP verb); else 403.

A review that still fails after its retries is a 401 for a token (upstream's authenticator
error) and a 500 for a decision (upstream's authorizer error). Unlike upstream, a request
with no credentials is a 401 at once rather than a review of `system:anonymous` (which
RBAC denies with a 403 anyway): an anonymous flood costs the API server nothing.

Results are cached as upstream caches them: both outcomes of a token review for
`--authentication-token-webhook-cache-ttl`, decisions for
`--authorization-webhook-cache-authorized-ttl` / `-unauthorized-ttl` (10 s each). A token's
cache key is an HMAC of it under a key made at start, so no key, log line or error holds a
token. Misses for one key wait for one review rather than each sending their own. Errors
are not cached.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from pyccm.kubeapi.errors import KubeError
from pyccm.kubeapi.reviews import ReviewedUser
from pyccm.manager.serving import peer_identity

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

AUTHENTICATED = "system:authenticated"


class Verdict(enum.Enum):
    ALLOWED = 200
    UNAUTHORIZED = 401
    FORBIDDEN = 403
    FAILED = 500


@dataclass(frozen=True)
class AccessSettings:
    # Upstream's DelegatingAuthorizationOptions default: the kubelet probes these.
    always_allow_paths: tuple[str, ...] = ("/healthz", "/readyz", "/livez")
    # Upstream's AlwaysAllowGroups: the API server would allow these anyway.
    always_allow_groups: tuple[str, ...] = ("system:masters",)
    # Upstream's 10 s: short enough that a revoked token or binding stops working soon,
    # long enough that a scrape every 15 s costs about one review pair.
    token_ttl: float = 10.0
    authorized_ttl: float = 10.0
    unauthorized_ttl: float = 10.0
    # Bounds each cache: a flood of distinct tokens cannot grow memory without limit.
    cache_entries: int = 4096

    def validate(self) -> None:
        for path in self.always_allow_paths:
            if "*" in path[:-1]:
                raise ValueError(
                    f"--authorization-always-allow-paths: only a trailing * is allowed in {path!r}"
                )
        for flag, ttl in (
            ("--authentication-token-webhook-cache-ttl", self.token_ttl),
            ("--authorization-webhook-cache-authorized-ttl", self.authorized_ttl),
            ("--authorization-webhook-cache-unauthorized-ttl", self.unauthorized_ttl),
        ):
            if ttl < 0:
                raise ValueError(f"{flag} cannot be negative")


class Reviewer(Protocol):
    """The API server's two answers (kubeapi.reviews.Reviews)."""

    def review_token(self, token: str) -> ReviewedUser | None: ...

    def review_access(self, user: ReviewedUser, *, path: str, verb: str) -> bool: ...


@dataclass(frozen=True)
class _Entry(Generic[V]):
    expires: float
    value: V


class TtlCache(Generic[K, V]):
    """Values that expire, at most `entries` of them (the oldest go first)."""

    def __init__(self, *, entries: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._entries = entries
        self._clock = clock
        self._items: OrderedDict[K, _Entry[V]] = OrderedDict()
        self._lock = threading.Lock()
        self._flights: dict[K, threading.Lock] = {}

    def get(self, key: K) -> _Entry[V] | None:
        with self._lock:
            entry = self._items.get(key)
            if entry is not None and entry.expires <= self._clock():
                del self._items[key]
                return None
            return entry

    def put(self, key: K, value: V, ttl: float) -> None:
        if ttl <= 0:
            return
        with self._lock:
            self._items[key] = _Entry(self._clock() + ttl, value)
            self._items.move_to_end(key)
            while len(self._items) > self._entries:
                self._items.popitem(last=False)

    def fetch(self, key: K, compute: Callable[[], V], ttl: Callable[[V], float]) -> tuple[V, bool]:
        """The cached value, or `compute()` cached for `ttl(value)`; True when computed
        here. Concurrent misses of one key compute once; an exception is not cached."""
        entry = self.get(key)
        if entry is not None:
            return entry.value, False
        with self._lock:
            flight = self._flights.setdefault(key, threading.Lock())
        try:
            with flight:
                entry = self.get(key)
                if entry is not None:
                    return entry.value, False
                value = compute()
                self.put(key, value, ttl(value))
                return value, True
        finally:
            with self._lock:
                self._flights.pop(key, None)


class Gate:
    """Decides each request on the secure port (see the module docstring)."""

    def __init__(
        self,
        *,
        settings: AccessSettings,
        reviewer: Reviewer,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._reviewer = reviewer
        self._exact = {p for p in settings.always_allow_paths if not p.endswith("*")}
        self._prefixes = tuple(p[:-1] for p in settings.always_allow_paths if p.endswith("*"))
        self._secret = secrets.token_bytes(32)
        self._tokens: TtlCache[str, ReviewedUser | None] = TtlCache(
            entries=settings.cache_entries, clock=clock
        )
        self._decisions: TtlCache[tuple[Any, ...], bool] = TtlCache(
            entries=settings.cache_entries, clock=clock
        )

    def always_allowed(self, path: str) -> bool:
        return path in self._exact or path.startswith(self._prefixes)

    def decide(
        self,
        *,
        path: str,
        verb: str,
        authorization: str,
        certificate: Mapping[str, Any] | None = None,
    ) -> Verdict:
        if self.always_allowed(path):
            return Verdict.ALLOWED
        try:
            user = self._authenticate(authorization, certificate)
        except KubeError as error:
            log.warning("a TokenReview failed, the request is unauthorized: %s", error)
            return Verdict.UNAUTHORIZED
        if user is None:
            return Verdict.UNAUTHORIZED
        if set(user.groups) & set(self._settings.always_allow_groups):
            return Verdict.ALLOWED
        try:
            allowed = self._authorize(user, path=path, verb=verb)
        except KubeError as error:
            log.warning("a SubjectAccessReview for %s %s failed: %s", verb, path, error)
            return Verdict.FAILED
        return Verdict.ALLOWED if allowed else Verdict.FORBIDDEN

    def _authenticate(
        self, authorization: str, certificate: Mapping[str, Any] | None
    ) -> ReviewedUser | None:
        # Upstream's union: a verified client certificate first, then a bearer token.
        identity = peer_identity(certificate)
        if identity is not None:
            name, groups = identity
            return _with_authenticated(ReviewedUser(username=name, groups=groups))
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        key = hmac.new(self._secret, token.encode(), hashlib.sha256).hexdigest()
        user, fresh = self._tokens.fetch(
            key, lambda: self._reviewer.review_token(token), lambda _: self._settings.token_ttl
        )
        if fresh and user is None:
            log.debug("a bearer token was not authenticated by the TokenReview")
        return None if user is None else _with_authenticated(user)

    def _authorize(self, user: ReviewedUser, *, path: str, verb: str) -> bool:
        key = (user.username, user.uid, tuple(sorted(user.groups)), path, verb)
        allowed, fresh = self._decisions.fetch(
            key,
            lambda: self._reviewer.review_access(user, path=path, verb=verb),
            lambda ok: self._settings.authorized_ttl if ok else self._settings.unauthorized_ttl,
        )
        if fresh and not allowed:
            log.info("forbidden: user %r may not %s %s", user.username, verb, path)
        return allowed


def _with_authenticated(user: ReviewedUser) -> ReviewedUser:
    """Upstream's AuthenticatedGroupAdder: every authenticated user is in this group."""
    if AUTHENTICATED in user.groups:
        return user
    return ReviewedUser(
        username=user.username, uid=user.uid, groups=(*user.groups, AUTHENTICATED), extra=user.extra
    )
