"""The provider's own errors: the only exceptions a controller ever catches from a cloud.

Upstream's cloud interface answers "this instance is gone", "not supported here", "another
controller owns this" and "call me again in N seconds" with sentinel errors, never with
`None` or `False` (docs/architecture.md#style-capability-protocols). Every other failure is a
`CloudError` that says whether
retrying can help, with the library's exception chained as its cause
(docs/architecture.md#style-own-errors). Messages
are built by the provider and never contain credentials.
"""

from __future__ import annotations


class ProviderError(Exception):
    """Base of every error the provider raises."""

    retryable: bool = True


class InstanceNotFound(ProviderError):
    """The node's server definitely does not exist (HTTP 404, or no server by that name).

    The lifecycle controller deletes a NotReady Node on this error and only on this one.
    """


class AmbiguousInstance(ProviderError):
    """More than one server matches the node's name; the provider refuses to guess."""


class InvalidProviderId(ProviderError):
    """The node's providerID is not one this provider understands (or names another region)."""

    retryable = False


class NotSupported(ProviderError):
    """The capability or call is not implemented by this provider (upstream `NotImplemented`)."""

    retryable = False


class ImplementedElsewhere(ProviderError):
    """Another controller handles this object: the caller treats it as a no-op success."""

    retryable = False


class RetryAfter(ProviderError):
    """Not an error so much as "call me again in `delay` seconds" (an LB still PENDING_*,
    a 429 with a long Retry-After). The service worker requeues the key after exactly this delay.
    """

    def __init__(self, message: str, *, delay: float) -> None:
        super().__init__(message)
        self.delay = delay


class CloudError(ProviderError):
    """A failed cloud call. `status` is the HTTP status when there was one."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable


class OwnedByAnotherCluster(CloudError):
    """The cloud resource a Service would use carries another cluster's identity
    (kubernetes/cloud-provider-openstack#3102): pyccm neither updates nor deletes it. `owner`
    is that cluster's id; the service controller turns this into a Warning event with
    `reason`."""

    reason = "LoadBalancerOwnedByAnotherCluster"

    def __init__(self, message: str, *, owner: str) -> None:
        super().__init__(message, retryable=False)
        self.owner = owner


class CloudNotFound(CloudError):
    """HTTP 404 from the cloud for something other than a node's server."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=404, retryable=True)


class CloudConflict(CloudError):
    """HTTP 409 from the cloud (an immutable load balancer, an address in use, ...)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=409, retryable=True)


class ConfigError(ProviderError):
    """The provider's configuration is missing or invalid: one line naming file, section and
    key. The command line prints it and exits with code 2; retrying cannot help.
    """

    retryable = False
