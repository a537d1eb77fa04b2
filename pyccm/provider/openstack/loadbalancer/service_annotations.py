"""Service annotations (docs/reference/annotations.md) and the Warning events a sync collects.

Upstream's parsing rules: booleans are only the literal `true` / `false`, integers that
do not parse fall back to the default. Where upstream silently falls back, or fails the
whole sync (a bad source range, PROXY protocol together with X-Forwarded-For), pyccm uses
the default and says so with a Warning event on the Service, so a typo is visible in
`kubectl describe service` instead of in a controller log.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pyccm.provider.interface import ProviderEvent
from pyccm.provider.openstack.loadbalancer import naming

PREFIX = "loadbalancer.openstack.org/"
INTERNAL = "service.beta.kubernetes.io/openstack-internal-load-balancer"
SOURCE_RANGES = "service.beta.kubernetes.io/load-balancer-source-ranges"
NODE_SELECTOR = PREFIX + "node-selector"
CONNECTION_LIMIT = PREFIX + "connection-limit"
FLOATING_NETWORK_ID = PREFIX + "floating-network-id"
FLOATING_SUBNET_ID = PREFIX + "floating-subnet-id"
FLOATING_SUBNET = PREFIX + "floating-subnet"
FLOATING_SUBNET_TAGS = PREFIX + "floating-subnet-tags"
CLASS = PREFIX + "class"
KEEP_FLOATINGIP = PREFIX + "keep-floatingip"
PORT_ID = PREFIX + "port-id"
LB_METHOD = PREFIX + "lb-method"
PROXY_PROTOCOL = PREFIX + "proxy-protocol"
X_FORWARDED_FOR = PREFIX + "x-forwarded-for"
X_FORWARDED_PORT = PREFIX + "x-forwarded-port"
X_FORWARDED_PROTO = PREFIX + "x-forwarded-proto"
# Each X-Forwarded annotation and the Octavia `insert_headers` key it turns on.
FORWARDED_HEADERS = {
    X_FORWARDED_FOR: "X-Forwarded-For",
    X_FORWARDED_PORT: "X-Forwarded-Port",
    X_FORWARDED_PROTO: "X-Forwarded-Proto",
}
SUBNET_ID = PREFIX + "subnet-id"
NETWORK_ID = PREFIX + "network-id"
MEMBER_SUBNET_ID = PREFIX + "member-subnet-id"
NODE_ADDRESS_TYPE = PREFIX + "node-address-type"
TIMEOUT_CLIENT_DATA = PREFIX + "timeout-client-data"
TIMEOUT_MEMBER_CONNECT = PREFIX + "timeout-member-connect"
TIMEOUT_MEMBER_DATA = PREFIX + "timeout-member-data"
TIMEOUT_TCP_INSPECT = PREFIX + "timeout-tcp-inspect"
FLAVOR_ID = PREFIX + "flavor-id"
AVAILABILITY_ZONE = PREFIX + "availability-zone"
ENABLE_HEALTH_MONITOR = PREFIX + "enable-health-monitor"
HEALTH_MONITOR_DELAY = PREFIX + "health-monitor-delay"
HEALTH_MONITOR_TIMEOUT = PREFIX + "health-monitor-timeout"
HEALTH_MONITOR_MAX_RETRIES = PREFIX + "health-monitor-max-retries"
HEALTH_MONITOR_MAX_RETRIES_DOWN = PREFIX + "health-monitor-max-retries-down"
# Beyond upstream: an externalTrafficPolicy Cluster Service's monitors check kube-proxy
# (`"false"`: the Service's port, as upstream's do).
HEALTH_MONITOR_KUBE_PROXY = PREFIX + "health-monitor-kube-proxy"
DEFAULT_TLS_CONTAINER_REF = PREFIX + "default-tls-container-ref"
HOSTNAME = PREFIX + "hostname"
LOAD_BALANCER_ID = PREFIX + "load-balancer-id"
LOAD_BALANCER_ADDRESS = PREFIX + "load-balancer-address"
# A user's own tags on the load balancer, its listeners and its pools (comma-separated).
LOAD_BALANCER_TAGS = PREFIX + "load-balancer-tags"
LISTENER_TAGS = PREFIX + "listener-tags"
POOL_TAGS = PREFIX + "pool-tags"

# The reason pyccm uses for an annotation it could not use (upstream has none: it logs).
INVALID_ANNOTATION = "LoadBalancerAnnotationInvalid"
# An externalTrafficPolicy Local Service whose health monitor its annotation turned off
# (upstream has none: its monitors are off unless asked for).
NO_HEALTH_MONITOR = "LoadBalancerWithoutHealthMonitor"
# `health-monitor-kube-proxy: "true"` on a load balancer whose monitors cannot check
# another port of the node (ovn, HTTP monitors on UDP pools, no readable API version).
KUBE_PROXY_MONITOR_UNAVAILABLE = "LoadBalancerKubeProxyHealthCheckUnavailable"
# What a few annotations must look like (Kubernetes' DNS-1123 subdomain, an OpenStack UUID,
# Octavia's 255-character availability zone names, label keys and values).
_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
DNS_SUBDOMAIN = re.compile(rf"(?=.{{1,253}}$){_SUBDOMAIN}")
UUID = re.compile(r"[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}")
ZONE_NAME = re.compile(r"[^\x00-\x1f]{1,255}")
# Octavia's tags are strings of at most 255 characters.
MAX_TAG = 255
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = rf"({_SUBDOMAIN}/)?{_LABEL_NAME}"
_LABEL_TERM = rf"\s*{_LABEL_KEY}\s*(=\s*({_LABEL_NAME})?\s*)?"
NODE_SELECTOR_FORMAT = re.compile(rf"{_LABEL_TERM}(,{_LABEL_TERM})*")


class Events:
    """The Warning events of one call, deduplicated, in the order they were raised."""

    def __init__(self) -> None:
        self._events: list[ProviderEvent] = []

    def warn(self, reason: str, message: str) -> None:
        event = ProviderEvent(type="Warning", reason=reason, message=message)
        if event not in self._events:
            self._events.append(event)

    def all(self) -> tuple[ProviderEvent, ...]:
        return tuple(self._events)


class Annotations:
    """Typed reads of one Service's annotations; bad values warn and give the default."""

    def __init__(self, values: Mapping[str, str], events: Events) -> None:
        self._values = values
        self._events = events

    def string(self, key: str, default: str = "") -> str:
        value = self._values.get(key)
        return default if value is None or value == "" else value

    def boolean(self, key: str, default: bool) -> bool:
        value = self._values.get(key)
        if value is None:
            return default
        if value in ("true", "false"):
            return value == "true"
        self.invalid(key, value, "is not true or false", default)
        return default

    def integer(self, key: str, default: int, *, minimum: int = 0) -> int:
        value = self._values.get(key)
        if value is None:
            return default
        try:
            number = int(value.strip())
        except ValueError:
            self.invalid(key, value, "is not an integer", default)
            return default
        if number < minimum:
            self.invalid(key, value, f"is below {minimum}", default)
            return default
        return number

    def matching(self, key: str, pattern: re.Pattern[str], why: str, default: str = "") -> str:
        """The value when the whole of it matches `pattern`, else a Warning and the default."""
        value = self.string(key)
        if not value or pattern.fullmatch(value):
            return value or default
        self.invalid(key, value, why, default)
        return default

    def tags(self, key: str) -> tuple[str, ...]:
        """A comma-separated list of tags, split as upstream splits it (at commas and white
        space, empty parts dropped). A tag Octavia would refuse, or one that looks like a tag
        pyccm's ownership rests on (a Service's name tag, a cluster's owner tag), refuses
        the whole annotation: a Warning, and none of its tags are written."""
        value = self.string(key)
        tags = tuple(dict.fromkeys(re.split(r"[\s,]+", value.strip(", \t\n")))) if value else ()
        for tag in tags:
            if len(tag) > MAX_TAG:
                why = f"holds a tag of {len(tag)} characters (Octavia takes at most {MAX_TAG})"
            elif naming.is_service_tag(tag) or tag.startswith(naming.OWNER_TAG_PREFIX):
                why = (
                    f"holds the tag {tag[:64]!r}, which looks like one of pyccm's ownership tags "
                    f"({naming.SERVICE_PREFIX}..., {naming.OWNER_TAG_PREFIX}...)"
                )
            else:
                continue
            self.invalid(key, value, why, "no tags")
            return ()
        return tags

    def invalid(self, key: str, value: str, why: str, default: object) -> None:
        shown = value if len(value) <= 64 else value[:61] + "..."
        self._events.warn(
            INVALID_ANNOTATION, f"annotation {key}={shown!r} {why}; using the default {default!r}"
        )
