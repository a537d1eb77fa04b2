"""Keystone v3: a token and its service catalog, and Nova's version document.

What upstream's gophercloud does, and no more (docs/architecture.md#provider-http):

* `POST {auth-url}/auth/tokens` with one method (password, token or application
  credential; a trust is a password scope), scoped to the configured project (or trust);
  the token is the `X-Subject-Token` answer header, the catalog is in the body;
* the token is used until 120 s before its `expires_at` (keystoneauth's margin), or until a
  service refuses it (401: `invalidate`), then one thread authenticates again while the
  others wait for it;
* endpoints are picked from the catalog by service type, interface (`public` for
  `publicURL`, as keystoneauth normalises it) and region (any region when none is set);
* Nova's highest microversion comes from its version document (`GET` of the versioned
  endpoint: `{"version": {"version": "2.96"}}`).

Every request goes through the `Send` the connection gives (its pools and throttle), so a
Keystone call is throttled like any other. Failures are `CloudError`s; a request body (it
holds the password) is never part of a message.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from pyccm.provider.errors import CloudError, ConfigError

# A token this close to its expiry is renewed first (keystoneauth's MIN_TOKEN_LIFE_SECONDS).
RENEW_BEFORE = 120.0


class Reply(Protocol):
    @property
    def status(self) -> int: ...
    @property
    def body(self) -> bytes: ...
    @property
    def headers(self) -> Mapping[str, str]: ...


Send = Callable[[str, str, Mapping[str, str], bytes | None], Reply]


class Endpoint(msgspec.Struct, frozen=True):
    url: str
    interface: str = ""
    region_id: str | None = None
    region: str | None = None


class Service(msgspec.Struct, frozen=True):
    type: str
    endpoints: list[Endpoint] = msgspec.field(default_factory=list)


class TokenDocument(msgspec.Struct, frozen=True):
    expires_at: str
    catalog: list[Service] = msgspec.field(default_factory=list)


class TokenAnswer(msgspec.Struct, frozen=True):
    token: TokenDocument


class VersionDocument(msgspec.Struct, frozen=True):
    id: str = ""
    version: str = ""


class VersionAnswer(msgspec.Struct, frozen=True):
    version: VersionDocument


@dataclass(frozen=True)
class Token:
    id: str
    expires_at: float
    catalog: tuple[Service, ...]

    def endpoint(self, service: str, *, interface: str, region: str | None) -> str | None:
        """The catalog URL of `service` for `interface` (and `region` when set)."""
        wanted = interface.removesuffix("URL")
        for entry in self.catalog:
            if entry.type != service:
                continue
            for endpoint in entry.endpoints:
                if endpoint.interface != wanted:
                    continue
                if region and region not in (endpoint.region_id, endpoint.region):
                    continue
                return endpoint.url
        return None


def request_body(kind: str, auth: Mapping[str, str]) -> dict[str, Any]:
    """The `POST /v3/auth/tokens` body for an identity (`connection.auth_arguments`)."""
    if kind == "v3applicationcredential":
        credential: dict[str, Any] = {"secret": auth["application_credential_secret"]}
        if auth.get("application_credential_id"):
            credential["id"] = auth["application_credential_id"]
        else:
            credential |= {"name": auth["application_credential_name"], "user": _user(auth)}
        identity = {"methods": ["application_credential"], "application_credential": credential}
        return {"auth": {"identity": identity}}
    if kind == "v3token":
        identity = {"methods": ["token"], "token": {"id": auth["token"]}}
    else:
        user = _user(auth) | {"password": auth.get("password", "")}
        identity = {"methods": ["password"], "password": {"user": user}}
    body: dict[str, Any] = {"identity": identity}
    if scope := _scope(auth):
        body["scope"] = scope
    return {"auth": body}


def _user(auth: Mapping[str, str]) -> dict[str, Any]:
    if auth.get("user_id"):
        return {"id": auth["user_id"]}
    return {"name": auth.get("username", ""), "domain": _domain(auth, "user")}


def _domain(auth: Mapping[str, str], prefix: str) -> dict[str, str]:
    if auth.get(f"{prefix}_domain_id"):
        return {"id": auth[f"{prefix}_domain_id"]}
    return {"name": auth.get(f"{prefix}_domain_name", "")}


def _scope(auth: Mapping[str, str]) -> dict[str, Any] | None:
    if auth.get("trust_id"):
        return {"OS-TRUST:trust": {"id": auth["trust_id"]}}
    if auth.get("project_id"):
        return {"project": {"id": auth["project_id"]}}
    if auth.get("project_name"):
        return {"project": {"name": auth["project_name"], "domain": _domain(auth, "project")}}
    return None


class Keystone:
    """The process's token for one identity. Thread-safe."""

    def __init__(
        self,
        *,
        auth_url: str,
        body: dict[str, Any],
        send: Send,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._url = auth_url.rstrip("/") + "/auth/tokens"
        self._body = msgspec.json.encode(body)
        self._send = send
        self._clock = clock
        self._lock = threading.Lock()
        self._token: Token | None = None

    def token(self) -> Token:
        """A token valid for at least `RENEW_BEFORE` seconds; authenticates when needed."""
        with self._lock:
            token = self._token
            if token is None or token.expires_at - self._clock() < RENEW_BEFORE:
                token = self._token = self._authenticate()
            return token

    def invalidate(self) -> None:
        with self._lock:
            self._token = None

    def _authenticate(self) -> Token:
        reply = self._send("POST", self._url, {"Content-Type": "application/json"}, self._body)
        if reply.status != 201:
            raise CloudError(
                f"keystone: POST {self._url} answered HTTP {reply.status}"
                + (f": {detail}" if (detail := fault_message(reply.body)) else ""),
                status=reply.status,
            )
        token_id = reply.headers.get("X-Subject-Token", "")
        try:
            document = msgspec.json.decode(reply.body, type=TokenAnswer).token
            expires_at = _timestamp(document.expires_at)
        except (msgspec.DecodeError, ValueError) as exc:
            raise CloudError(f"keystone: unexpected token body ({exc})") from None
        if not token_id:
            raise CloudError("keystone: the token answer has no X-Subject-Token header")
        return Token(id=token_id, expires_at=expires_at, catalog=tuple(document.catalog))


def _timestamp(text: str) -> float:
    """Keystone's `expires_at` (`2026-11-27T21:00:00.000000Z`) as seconds since the epoch."""
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def max_microversion(body: bytes) -> tuple[int, int] | None:
    """The highest microversion of a Nova version document; None if it offers none."""
    try:
        version = msgspec.json.decode(body, type=VersionAnswer).version.version
    except msgspec.DecodeError:
        return None
    major, _, minor = version.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        return None
    return int(major), int(minor)


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


def check_identity(auth: Mapping[str, str], *, path: object) -> None:
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
