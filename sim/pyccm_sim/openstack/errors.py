"""One exception for every API error, rendered in the shape of the service that raised it.

Each OpenStack service has its own error body: Nova nests the message under a code name
(`itemNotFound`, `badRequest`, ...), Neutron under `NeutronError` with a type, Octavia uses
`faultcode`/`faultstring`, Keystone (and keystonemiddleware's 401 for every service) uses
`error`. Clients map status codes to exceptions and show the message, so both must be
right; handlers raise `ApiError` and the app renders it for the service in hand.
"""

from __future__ import annotations

from typing import Any

NOVA_CODE_NAMES = {
    400: "badRequest",
    401: "unauthorized",
    403: "forbidden",
    404: "itemNotFound",
    405: "HTTPMethodNotAllowed",
    406: "HTTPNotAcceptable",
    409: "conflictingRequest",
    413: "overLimit",
    429: "overLimit",
}
TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    406: "Not Acceptable",
    409: "Conflict",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
NEUTRON_TYPES = {
    400: "HTTPBadRequest",
    401: "HTTPUnauthorized",
    403: "HTTPForbidden",
    404: "HTTPNotFound",
    405: "HTTPMethodNotAllowed",
    409: "HTTPConflict",
    429: "OverQuota",
    503: "ServiceUnavailable",
}
UNAUTHORIZED_MESSAGE = "The request you have made requires authentication."


class ApiError(Exception):
    """An HTTP error answer; `kind` is Neutron's error type (e.g. `PortNotFound`).

    `body` replaces the service's usual error shape, for the few answers a service
    renders another way (Octavia's errors raised outside its WSME controllers).
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: str | None = None,
        headers: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.headers = headers or {}
        self.body = body


def not_found(message: str, *, kind: str | None = None) -> ApiError:
    return ApiError(404, message, kind=kind)


def bad_request(message: str, *, kind: str | None = None) -> ApiError:
    return ApiError(400, message, kind=kind)


def conflict(message: str, *, kind: str | None = None) -> ApiError:
    return ApiError(409, message, kind=kind)


def unauthorized() -> ApiError:
    return ApiError(401, UNAUTHORIZED_MESSAGE)


def render(service: str, error: ApiError) -> dict[str, Any]:
    """The JSON body `service` would answer with for `error`."""
    status = error.status
    if error.body is not None:
        return error.body
    if service == "identity" or status == 401:
        # keystonemiddleware answers 401 in Keystone's shape in front of every service.
        title = TITLES.get(status, "Error")
        return {"error": {"code": status, "message": error.message, "title": title}}
    if service == "compute":
        name = NOVA_CODE_NAMES.get(status, "computeFault")
        return {name: {"code": status, "message": error.message}}
    if service == "network":
        kind = error.kind or NEUTRON_TYPES.get(status, "HTTPInternalServerError")
        return {"NeutronError": {"type": kind, "message": error.message, "detail": ""}}
    if service == "load-balancer":
        fault = "Client" if status < 500 else "Server"
        return {"faultcode": fault, "faultstring": error.message, "debuginfo": None}
    return {"error": {"code": status, "message": error.message, "title": TITLES.get(status, "")}}
