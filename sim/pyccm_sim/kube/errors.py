"""Kubernetes API errors as the real API server returns them: `kind: Status` objects.

Every failure the simulator reports travels as one `ApiError`, raised anywhere below the
HTTP layer and turned into a `Status` body with the same `reason`, `code` and message
shape as kube-apiserver (`nodes "x" not found`, `Operation cannot be fulfilled on ...`),
because clients branch on `reason`/`code` and humans read the message. The helpers below
are the only place those message formats live.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


class ApiError(Exception):
    """A request the API refuses; `status()` is the body the client receives."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: Obj | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.retry_after = retry_after

    def status(self) -> Obj:
        body: Obj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def _details(resource: str, name: str, group: str = "") -> Obj:
    details: Obj = {"kind": resource}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return details


def qualified(resource: str, group: str) -> str:
    """`nodes` for the core group, `leases.coordination.k8s.io` otherwise, as messages say."""
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, name: str, group: str = "") -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{qualified(resource, group)} "{name}" not found',
        details=_details(resource, name, group),
    )


def no_such_path() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")


def already_exists(resource: str, name: str, group: str = "") -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(resource, group)} "{name}" already exists',
        details=_details(resource, name, group),
    )


def conflict(resource: str, name: str, group: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {why}',
        details=_details(resource, name, group),
    )


STALE_OBJECT = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def invalid(kind: str, name: str, group: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """422 Invalid; each cause is (field, cause reason, message)."""
    summary = ", ".join(f"{field}: {message}" for field, _, message in causes)
    details: Obj = {
        "name": name,
        "kind": kind,
        "causes": [
            {"reason": reason, "message": message, "field": field}
            for field, reason, message in causes
        ],
    }
    if group:
        details["group"] = group
    label = f"{kind}.{group}" if group else kind
    return ApiError(422, "Invalid", f'{label} "{name}" is invalid: {summary}', details=details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(resource: str, name: str, group: str, why: str) -> ApiError:
    target = f'{qualified(resource, group)} "{name}"' if name else qualified(resource, group)
    return ApiError(
        403, "Forbidden", f"{target} is forbidden: {why}", details=_details(resource, name, group)
    )


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def method_not_allowed() -> ApiError:
    return ApiError(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )


def too_many_requests(retry_after: int) -> ApiError:
    return ApiError(
        429,
        "TooManyRequests",
        "Too many requests, please try again later.",
        details={"retryAfterSeconds": retry_after},
        retry_after=retry_after,
    )


def internal_error(why: str) -> ApiError:
    return ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {why}",
        details={"causes": [{"message": why}]},
    )


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def too_large_resource_version(requested: int, current: int) -> ApiError:
    return ApiError(
        504,
        "Timeout",
        f"Too large resource version: {requested}, current: {current}",
        details={
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ],
            "retryAfterSeconds": 1,
        },
    )


def unsupported_media_type(content_type: str, accepted: list[str], *, detail: str = "") -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format ({content_type or 'none'})"
        f" - accepted media types include: {', '.join(accepted)}"
        + (f" ({detail})" if detail else ""),
    )


def entity_too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        "RequestEntityTooLarge",
        f"the request body is larger than the limit of {limit} bytes",
    )
