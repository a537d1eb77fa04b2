"""Kubernetes API failures as a small tree of exceptions (docs/architecture.md#style-own-errors).

Each knows whether retrying can help, and `TooManyRequests` carries the server's
`Retry-After`. The API's `Status` body gives the reason; the status code decides the class.
"""

from __future__ import annotations

import msgspec

from pyccm.protocol.decoding import decode_json


class KubeError(Exception):
    retryable = False

    def __init__(self, message: str, *, code: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason


class BadRequest(KubeError):
    pass


class Unauthorized(KubeError):
    pass


class Forbidden(KubeError):
    pass


class NotFound(KubeError):
    pass


class Conflict(KubeError):
    """409: a stale resourceVersion, a failed precondition, or AlreadyExists."""


class AlreadyExists(Conflict):
    pass


class Gone(KubeError):
    """410: the resourceVersion is older than the server's retained window."""


class Invalid(KubeError):
    pass


class TooManyRequests(KubeError):
    retryable = True

    def __init__(
        self, message: str, *, code: int = 429, reason: str = "", retry_after: float = 1.0
    ) -> None:
        super().__init__(message, code=code, reason=reason)
        self.retry_after = retry_after


class ServerError(KubeError):
    retryable = True


class Unavailable(KubeError):
    """No answer at all: connection refused or reset, timeout."""

    retryable = True


class KubeConfigError(ValueError):
    """A kubeconfig or an in-cluster setup pyccm cannot use (pyccm.kubeapi.config): one
    line naming the file and the field, never a secret. Not a `KubeError`: no request was
    made. The commands print it and exit 2 (a ValueError, as their other bad settings)."""


class _Status(msgspec.Struct):
    message: str = ""
    reason: str = ""
    code: int = 0


_BY_CODE: dict[int, type[KubeError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: BadRequest,
    409: Conflict,
    410: Gone,
    422: Invalid,
}


def from_response(code: int, body: bytes, retry_after: str | None = None) -> KubeError:
    """The exception for a non-2xx answer."""
    try:
        status = decode_json(body, _Status)
    except msgspec.DecodeError:
        status = _Status(message=body[:200].decode(errors="replace"))
    message = f"{code} {status.reason or 'error'}: {status.message}".rstrip(": ")
    if code == 429:
        return TooManyRequests(message, reason=status.reason, retry_after=_seconds(retry_after))
    if code == 409 and status.reason == "AlreadyExists":
        return AlreadyExists(message, code=code, reason=status.reason)
    if code >= 500:
        return ServerError(message, code=code, reason=status.reason)
    return _BY_CODE.get(code, KubeError)(message, code=code, reason=status.reason)


def _seconds(value: str | None) -> float:
    try:
        return max(0.0, float(value)) if value else 1.0
    except ValueError:
        return 1.0
