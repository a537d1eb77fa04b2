"""The small request/reply vocabulary the service modules are written in.

Service handlers are plain synchronous functions from a parsed `Req` to a `Reply`: the
models live in memory on the event loop thread, so nothing a handler does can block, and
keeping aiohttp out of them keeps them short and testable. `app` adapts them to aiohttp,
parses bodies, checks tokens and renders `ApiError`s in each service's shape.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from multidict import MultiMapping

from pyccm_sim.openstack.errors import bad_request


@dataclass(slots=True)
class Req:
    method: str
    path: str
    query: MultiMapping[str]
    match: Mapping[str, str]
    headers: Mapping[str, str]
    body: Any
    # Scheme://host:port the client used; discovery documents and links are built on it.
    base_url: str
    # The project id of the caller's token (None for unauthenticated routes).
    project_id: str | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: Any = None
    headers: Mapping[str, str] | None = None


Handler = Callable[[Req], Reply]


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    path: str
    handler: Handler
    # Discovery documents and POST /auth/tokens are the only unauthenticated calls.
    auth: bool = True


def ok(body: Any) -> Reply:
    return Reply(200, body)


def created(body: Any) -> Reply:
    return Reply(201, body)


NO_CONTENT = Reply(204)


def json_object(req: Req, root: str) -> dict[str, Any]:
    """`req.body[root]`, which must be a JSON object, else 400 as the services answer."""
    body = req.body
    if not isinstance(body, dict) or not isinstance(body.get(root), dict):
        raise bad_request(f"Resource body must contain a JSON object named '{root}'.")
    value: dict[str, Any] = body[root]
    return value


def reject_unknown(fields: Iterable[str], allowed: frozenset[str], *, message: str) -> None:
    """400 naming the unknown attributes, as Neutron and Octavia do for unknown fields."""
    unknown = sorted(set(fields) - allowed)
    if unknown:
        raise bad_request(message.format(names=", ".join(unknown)))


def require_str(obj: Mapping[str, Any], name: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str) or not value:
        raise bad_request(f"Invalid input for {name}: a non-empty string is required.")
    return value


def optional_str(obj: Mapping[str, Any], name: str) -> str | None:
    value = obj.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise bad_request(f"Invalid input for {name}: '{value}' is not a string.")
    return value


def require_int(obj: Mapping[str, Any], name: str, *, low: int, high: int) -> int:
    value = obj.get(name)
    # bool is an int in Python but not in JSON schema.
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise bad_request(f"Invalid input for {name}: must be an integer in {low}..{high}.")
    return value


def string_list(obj: Mapping[str, Any], name: str) -> list[str] | None:
    value = obj.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise bad_request(f"Invalid input for {name}: a list of strings is required.")
    return list(value)
