"""Keystone v3: version discovery, tokens and the service catalog.

keystoneauth's generic plugins first GET the auth URL for version discovery, then POST
`/v3/auth/tokens` and read the token from `X-Subject-Token` and the catalog from the body;
every later request carries `X-Auth-Token`, and a 401 makes keystoneauth authenticate
again once. So this module serves the discovery documents, accepts the password,
application-credential, token and trust methods with Keystone's scoping rules, answers
401 (with Keystone's JSON error) for wrong credentials, and validates tokens for the
other services. Tokens are random and never logged.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pyccm_sim.openstack.errors import ApiError, bad_request, not_found, unauthorized
from pyccm_sim.openstack.routing import NO_CONTENT, Reply, Req, Route, json_object, ok
from pyccm_sim.openstack.settings import Knobs, SimSettings
from pyccm_sim.openstack.store import Ids

IDENTITY_VERSION = "v3.14"
UPDATED = "2020-04-07T00:00:00Z"
# (service type, service name, path under the simulator's root).
CATALOG_SERVICES = (
    ("identity", "keystone", "/identity/v3"),
    ("compute", "nova", "/compute/v2.1"),
    ("network", "neutron", "/network"),
    ("load-balancer", "octavia", "/load-balancer"),
)
INTERFACES = ("public", "internal", "admin")
TOKEN_METHODS = frozenset({"password", "application_credential", "token"})


@dataclass(frozen=True, slots=True)
class Token:
    methods: tuple[str, ...]
    project_id: str | None
    domain_scoped: bool
    issued_at: float
    expires_at: float


@dataclass(frozen=True, slots=True)
class Scope:
    project_id: str | None
    domain_scoped: bool = False


class Keystone:
    """One domain, user, project, application credential and trust; the issued tokens."""

    def __init__(self, *, settings: SimSettings, ids: Ids, knobs: Knobs | None = None) -> None:
        self._settings = settings
        self._creds = settings.credentials
        self._knobs = knobs or Knobs()
        self.user_id = ids.hex()
        self.project_id = ids.hex()
        self.app_credential_id = ids.hex()
        self.role_id = ids.hex()
        self._endpoint_ids = {service: ids.hex() for service, _, _ in CATALOG_SERVICES}
        self._tokens: dict[str, Token] = {}

    # -- tokens -----------------------------------------------------------------------

    def validate(self, token_id: str | None) -> Token | None:
        if not token_id:
            return None
        token = self._tokens.get(token_id)
        if token is None or token.expires_at <= time.time():
            return None
        return token

    def revoke_all(self) -> int:
        """Forget every token (clients must re-authenticate); returns how many."""
        count = len(self._tokens)
        self._tokens.clear()
        return count

    def adopt_tokens(self, other: Keystone) -> None:
        """Keep the tokens another instance issued (a reset cloud keeps its clients logged in)."""
        self._tokens.update(other._tokens)

    def revoke(self, token_id: str) -> None:
        self._tokens.pop(token_id, None)

    def issue(self, auth: dict[str, Any]) -> tuple[str, Token]:
        identity = auth.get("identity")
        if not isinstance(identity, dict):
            raise bad_request("Expecting to find identity in auth.")
        methods = identity.get("methods")
        if not isinstance(methods, list) or not methods:
            raise bad_request("Expecting to find methods in identity.")
        scope = self._authenticate(identity, [str(method) for method in methods], auth)
        now = time.time()
        token = Token(
            methods=tuple(methods),
            project_id=scope.project_id,
            domain_scoped=scope.domain_scoped,
            issued_at=now,
            expires_at=now + self._settings.token_ttl_s,
        )
        token_id = "gAAAAA" + secrets.token_urlsafe(32)
        self._tokens[token_id] = token
        return token_id, token

    def _authenticate(
        self, identity: dict[str, Any], methods: list[str], auth: dict[str, Any]
    ) -> Scope:
        unknown = [method for method in methods if method not in TOKEN_METHODS]
        if unknown:
            raise unauthorized()
        section = _section(identity, methods[0])
        if methods[0] == "password":
            self._check_password(section)
        elif methods[0] == "application_credential":
            self._check_app_credential(section)
            if "scope" in auth:
                raise unauthorized()
            return Scope(project_id=self.project_id)
        else:
            previous = self.validate(str(section.get("id", "")))
            if previous is None:
                raise not_found("Could not find token.")
            if "scope" not in auth:
                return Scope(previous.project_id, previous.domain_scoped)
        return self._scope(auth.get("scope"))

    def _check_password(self, section: dict[str, Any]) -> None:
        user = section.get("user")
        if not isinstance(user, dict):
            raise bad_request("Expecting to find user in password.")
        if not self._is_our_user(user):
            raise unauthorized()
        if user.get("password") != (self._knobs.keystone_password or self._creds.password):
            raise unauthorized()

    def _check_app_credential(self, section: dict[str, Any]) -> None:
        if section.get("secret") != self._creds.app_credential_secret:
            raise unauthorized()
        if "id" in section:
            if section["id"] != self.app_credential_id:
                raise unauthorized()
            return
        user = section.get("user")
        if section.get("name") != self._creds.app_credential_name or not isinstance(user, dict):
            raise unauthorized()
        if not self._is_our_user(user):
            raise unauthorized()

    def _is_our_user(self, user: dict[str, Any]) -> bool:
        if "id" in user:
            return bool(user["id"] == self.user_id)
        if "name" not in user:
            raise bad_request("Expecting to find id or name in user.")
        domain = user.get("domain")
        if not isinstance(domain, dict):
            raise bad_request("Expecting to find domain in user.")
        return user["name"] == self._creds.username and self._is_our_domain(domain)

    def _is_our_domain(self, domain: dict[str, Any]) -> bool:
        return (
            domain.get("id") == self._creds.domain_id
            or domain.get("name") == self._creds.domain_name
        )

    def _scope(self, scope: Any) -> Scope:
        if scope is None:
            return Scope(project_id=None)
        if not isinstance(scope, dict):
            raise bad_request("Invalid scope.")
        if "OS-TRUST:trust" in scope:
            trust = scope["OS-TRUST:trust"]
            if not isinstance(trust, dict) or trust.get("id") != self._creds.trust_id:
                raise unauthorized()
            return Scope(project_id=self.project_id)
        if isinstance(scope.get("project"), dict):
            if not self._is_our_project(scope["project"]):
                raise unauthorized()
            return Scope(project_id=self.project_id)
        if isinstance(scope.get("domain"), dict):
            if not self._is_our_domain(scope["domain"]):
                raise unauthorized()
            return Scope(project_id=None, domain_scoped=True)
        raise bad_request("Expecting to find project, domain or OS-TRUST:trust in scope.")

    def _is_our_project(self, project: dict[str, Any]) -> bool:
        if "id" in project:
            return bool(project["id"] == self.project_id)
        domain = project.get("domain")
        if not isinstance(domain, dict):
            raise bad_request("Expecting to find domain in project.")
        return project.get("name") == self._creds.project_name and self._is_our_domain(domain)

    # -- documents ----------------------------------------------------------------------

    def token_body(self, token: Token, base_url: str) -> dict[str, Any]:
        domain = {"id": self._creds.domain_id, "name": self._creds.domain_name}
        body: dict[str, Any] = {
            "methods": list(token.methods),
            "expires_at": _iso(token.expires_at),
            "issued_at": _iso(token.issued_at),
            "audit_ids": [secrets.token_urlsafe(16)],
            "user": {
                "id": self.user_id,
                "name": self._creds.username,
                "domain": domain,
                "password_expires_at": None,
            },
        }
        if token.project_id is not None:
            body["project"] = {
                "id": self.project_id,
                "name": self._creds.project_name,
                "domain": domain,
            }
        elif token.domain_scoped:
            body["domain"] = domain
        if token.project_id is not None or token.domain_scoped:
            body["roles"] = [{"id": self.role_id, "name": "member"}]
            body["catalog"] = self.catalog(base_url)
        if "application_credential" in token.methods:
            body["application_credential"] = {
                "id": self.app_credential_id,
                "name": self._creds.app_credential_name,
                "restricted": True,
            }
        return {"token": body}

    def catalog(self, base_url: str) -> list[dict[str, Any]]:
        region = self._settings.region
        return [
            {
                "type": service_type,
                "name": name,
                "id": self._endpoint_ids[service_type],
                "endpoints": [
                    {
                        "id": f"{self._endpoint_ids[service_type]}-{interface}",
                        "interface": interface,
                        "region": region,
                        "region_id": region,
                        "url": base_url + path,
                    }
                    for interface in INTERFACES
                ],
            }
            for service_type, name, path in CATALOG_SERVICES
        ]


def _section(identity: dict[str, Any], method: str) -> dict[str, Any]:
    section = identity.get(method)
    if not isinstance(section, dict):
        raise bad_request(f"Expecting to find {method} in identity.")
    return section


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _version(base_url: str) -> dict[str, Any]:
    return {
        "id": IDENTITY_VERSION,
        "status": "stable",
        "updated": UPDATED,
        "links": [{"rel": "self", "href": f"{base_url}/identity/v3/"}],
        "media-types": [
            {"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}
        ],
    }


def routes(keystone: Keystone) -> list[Route]:
    """Keystone's routes under `/identity`."""

    def versions(req: Req) -> Reply:
        return Reply(300, {"versions": {"values": [_version(req.base_url)]}})

    def version(req: Req) -> Reply:
        return ok({"version": _version(req.base_url)})

    def issue_token(req: Req) -> Reply:
        auth = json_object(req, "auth")
        token_id, token = keystone.issue(auth)
        body = keystone.token_body(token, req.base_url)
        return Reply(201, body, {"X-Subject-Token": token_id})

    def check_token(req: Req) -> Reply:
        subject = keystone.validate(req.headers.get("X-Subject-Token"))
        if subject is None:
            raise ApiError(404, "Could not find token.")
        if req.method == "HEAD":
            return Reply(200)
        return ok(keystone.token_body(subject, req.base_url))

    def revoke_token(req: Req) -> Reply:
        if keystone.validate(req.headers.get("X-Subject-Token")) is None:
            raise ApiError(404, "Could not find token.")
        keystone.revoke(req.headers.get("X-Subject-Token", ""))
        return NO_CONTENT

    return [
        Route("GET", "/identity", versions, auth=False),
        Route("GET", "/identity/", versions, auth=False),
        Route("GET", "/identity/v3", version, auth=False),
        Route("GET", "/identity/v3/", version, auth=False),
        Route("POST", "/identity/v3/auth/tokens", issue_token, auth=False),
        Route("GET", "/identity/v3/auth/tokens", check_token),
        Route("HEAD", "/identity/v3/auth/tokens", check_token),
        Route("DELETE", "/identity/v3/auth/tokens", revoke_token),
    ]
