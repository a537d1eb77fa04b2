"""The process's Keystone token: when to authenticate, and who waits for it.

Authentication itself is keystoneauth1's, run in a short-lived child
(`authenticate.py`, through `child.py`): version discovery of `auth-url`, the v3 plugin's
token request, the service catalog. This module decides when a token is needed and keeps
the process's one token (docs/architecture.md#provider-http):

* a token is used until `RENEW_BEFORE` seconds before its expiry (keystoneauth's own
  margin); inside the margin one thread renews it while the others go on with the old
  one, which is still valid;
* only one authentication runs at a time; every thread that needs a token meanwhile waits
  for that one, and no longer than its deadline (the child is killed there);
* `invalidate(token)` (a service answered 401) forgets the token only if it is still the
  current one: twenty concurrent 401s on one token make one authentication, not twenty;
* a failed authentication is not repeated for `FIRST_FAILURE_BACKOFF` seconds, doubling to
  `MAX_FAILURE_BACKOFF`: calls in between fail at once with the same error, so a Keystone
  that is down, or refuses the credentials, is not asked in a hot loop;
* each authentication is counted (`pyccm_keystone_authentications_total`) and timed; a
  failure is a `CloudError` whose one line the caller logs (a worker's failed sync) or
  prints (`gc`, `plan`): not logged here as well, so that it is said once.

Neither `Token` nor `Keystone` shows a secret in its repr.
"""

from __future__ import annotations

import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
from prometheus_client import Counter, Histogram

from pyccm.provider.errors import CloudError
from pyccm.provider.openstack.transport import child

# A token this close to its expiry is renewed first (keystoneauth's MIN_TOKEN_LIFE_SECONDS).
RENEW_BEFORE = 120.0
# A token this close to its expiry is not used even while another thread renews it.
STILL_USABLE = 10.0
FIRST_FAILURE_BACKOFF = 1.0
MAX_FAILURE_BACKOFF = 30.0
# Seconds a child has to start Python and import keystoneauth1, on top of the HTTP timeout.
CHILD_START = 10.0
AUTHENTICATE = "pyccm.provider.openstack.transport.authenticate"
# The plugin options that are secrets (and the proxy URL's credentials are in `proxies`).
SECRET_OPTIONS = ("password", "token", "application_credential_secret")
SERVICES = ("compute", "network", "load-balancer")

AUTHENTICATIONS = Counter(
    "pyccm_keystone_authentications_total",
    "Keystone authentications by outcome: ok, refused (Keystone answered with an error), "
    "timeout (no answer within the deadline: the child was killed), failed (no connection, "
    "TLS, discovery).",
    ["outcome"],
)
AUTHENTICATION_SECONDS = Histogram(
    "pyccm_keystone_authentication_duration_seconds",
    "Time of one Keystone authentication (version discovery and token request, in a child).",
    buckets=(0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
)


@dataclass(frozen=True)
class Token:
    id: str = field(repr=False)
    expires_at: float
    endpoints: Mapping[str, str | None]

    def endpoint(self, service: str) -> str | None:
        return self.endpoints.get(service)


class _Answer(msgspec.Struct, frozen=True):
    token: str
    expires_at: float | None
    endpoints: dict[str, str | None]


Ask = Callable[[str, Mapping[str, Any], float], dict[str, Any]]


def _ask_child(module: str, question: Mapping[str, Any], deadline: float) -> dict[str, Any]:
    return child.ask(module, question, deadline=deadline)


class Keystone:
    """The token of one identity. Thread-safe. `question` is what the child gets (the
    credentials among it); `deadline` bounds one whole authentication."""

    def __init__(
        self,
        *,
        question: Mapping[str, Any],
        where: str,
        deadline: float,
        before: Callable[[], object] = lambda: None,
        ask: Ask = _ask_child,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._question = dict(question)
        # What a Keystone answer quoted back must never carry into a log or an error.
        options = question.get("options", {})
        proxy_passwords = (
            urllib.parse.urlsplit(url).password for url in question.get("proxies", {}).values()
        )
        self._secrets = tuple(
            [str(options[key]) for key in SECRET_OPTIONS if options.get(key)]
            + [urllib.parse.unquote(word) for word in proxy_passwords if word]
        )
        self._where = where
        self._deadline = deadline
        self._before = before
        self._ask = ask
        self._clock = clock
        self._token: Token | None = None
        self._authenticating = threading.Lock()
        self._failure: CloudError | None = None
        self._failed_until = 0.0
        self._backoff = FIRST_FAILURE_BACKOFF

    def __repr__(self) -> str:
        return f"Keystone({self._where})"

    def token(self) -> Token:
        """A token valid for at least `RENEW_BEFORE` seconds, or one still usable while
        another thread renews it; authenticates when needed."""
        token = self._token
        if self._fresh(token):
            assert token is not None
            return token
        if self._usable(token):
            if not self._authenticating.acquire(blocking=False):
                assert token is not None
                return token  # another thread renews it; the current one serves meanwhile
        else:
            # Bounded by the holder's deadline: its child is killed there.
            self._authenticating.acquire()
        try:
            token = self._token
            if self._fresh(token):
                assert token is not None
                return token
            token = self._token = self._authenticate()
            return token
        finally:
            self._authenticating.release()

    def invalidate(self, token: Token) -> None:
        """`token` was refused (401): forget it, unless another thread replaced it already."""
        if self._token is token:
            self._token = None

    def _scrubbed(self, error: CloudError) -> CloudError:
        message = str(error)
        for secret in self._secrets:
            message = message.replace(secret, "***")
        return CloudError(message, status=error.status, retryable=error.retryable)

    def _fresh(self, token: Token | None) -> bool:
        return token is not None and token.expires_at - self._clock() >= RENEW_BEFORE

    def _usable(self, token: Token | None) -> bool:
        return token is not None and token.expires_at - self._clock() >= STILL_USABLE

    def _authenticate(self) -> Token:
        now = self._clock()
        if self._failure is not None and now < self._failed_until:
            raise CloudError(str(self._failure), status=self._failure.status, retryable=True)
        self._before()
        started = time.monotonic()
        try:
            answer = self._ask(AUTHENTICATE, self._question, self._deadline)
            decoded = msgspec.convert(answer, _Answer)
        except child.ChildTimeout as hung:
            outcome, error = "timeout", CloudError(f"keystone: {self._where} gave {hung}")
        except child.ChildError as refused:
            outcome = "refused" if refused.status else "failed"
            error = CloudError(f"keystone: {refused}", status=refused.status)
        except msgspec.ValidationError as exc:
            outcome, error = "failed", CloudError(f"keystone: unexpected answer ({exc})")
        else:
            AUTHENTICATIONS.labels(outcome="ok").inc()
            AUTHENTICATION_SECONDS.observe(time.monotonic() - started)
            self._failure, self._backoff = None, FIRST_FAILURE_BACKOFF
            # A token without an expiry (Keystone always sends one) is renewed hourly.
            expires = decoded.expires_at or self._clock() + 3600.0
            return Token(id=decoded.token, expires_at=expires, endpoints=decoded.endpoints)
        AUTHENTICATIONS.labels(outcome=outcome).inc()
        AUTHENTICATION_SECONDS.observe(time.monotonic() - started)
        error = self._scrubbed(error)
        self._failure, self._failed_until = error, self._clock() + self._backoff
        self._backoff = min(self._backoff * 2, MAX_FAILURE_BACKOFF)
        raise error
