"""Start-up settings (frozen) and fault knobs (mutable at run time) of the OpenStack simulator.

Settings are fixed for the life of a process: where it listens, which region and
credentials the seeded cloud has. Knobs are what tests and fault drills turn while the
simulator runs (latency, injected errors, the Octavia provisioning delay, quotas, API
versions), through the `/_sim/knobs` admin endpoint or `OpenStackSimHandle.set_knobs`.
A test session starts the simulator once, so every behaviour a test wants to vary must
be a knob, not a setting.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass, field
from typing import Any

SERVICES = ("identity", "compute", "network", "load-balancer")
VERSION_RE = re.compile(r"^2\.(\d+)$")
# oslo.middleware's default `max_request_body_size` ("default request size is 112k").
DEFAULT_MAX_REQUEST_BODY_SIZE = 114_688


@dataclass(frozen=True)
class Credentials:
    """The one user, project and application credential the seeded cloud accepts."""

    # "Default" is the domain every Keystone deployment ships; cloud.conf files name it.
    domain_id: str = "default"
    domain_name: str = "Default"
    username: str = "pyccm"
    password: str = "pyccm-sim-secret"
    project_name: str = "pyccm"
    app_credential_name: str = "pyccm-ccm"
    app_credential_secret: str = "pyccm-sim-app-secret"
    trust_id: str = "pyccm-trust"


@dataclass(frozen=True)
class SimSettings:
    """How one simulator process starts; passed by keyword, never mutated."""

    host: str = "127.0.0.1"
    # 0: the OS picks a free port, so parallel test sessions never collide.
    port: int = 0
    # devstack's default region name; cloud.conf and clouds.yaml are written with it.
    region: str = "RegionOne"
    credentials: Credentials = field(default_factory=Credentials)
    # Keystone's default token lifetime is one hour; tests shorten it to force re-auth.
    token_ttl_s: float = 3600.0
    # Ids and MAC addresses come from a seeded generator so two runs build the same cloud.
    random_seed: int = 0
    # Log each request at INFO (the CLI turns this on with -v); off by default for speed.
    access_log: bool = False


@dataclass(frozen=True)
class FailRule:
    """Fail the next `count` matching calls with `status` (429/503 with Retry-After)."""

    service: str  # a service type from SERVICES, or "*"
    status: int
    count: int = 1
    retry_after_s: float | None = None
    # Empty: any method; else only these (e.g. ("POST", "PUT", "DELETE") for writes).
    methods: tuple[str, ...] = ()


@dataclass
class Knobs:
    """Fault and behaviour knobs; the app reads them on every request (no copying)."""

    # Added to every service call (not the admin API): fixed part plus uniform jitter.
    latency_ms: float = 0.0
    latency_jitter_ms: float = 0.0
    # Per service type: {status: probability}; 429/503 carry Retry-After: retry_after_s.
    error_rates: dict[str, dict[int, float]] = field(default_factory=dict)
    retry_after_s: float = 1.0
    # Deterministic faults, consumed in order.
    fail_next: list[FailRule] = field(default_factory=list)
    # Small so tests are fast, non-zero so PENDING_* is observable; the demo raises it.
    provisioning_delay_s: float = 0.05
    # The next N load balancers created go to ERROR instead of ACTIVE.
    force_error_next_lbs: int = 0
    # Maximum number of load balancers (Octavia answers 403 when met); None = unlimited.
    lb_quota: int | None = None
    # False: PUT /pools/{id}/members answers 405, like a provider without batch support.
    batch_members: bool = True
    # Neutron extension aliases hidden from /v2.0/extensions (e.g. "extraroute-atomic").
    disabled_extensions: set[str] = field(default_factory=set)
    # Top of the Octavia version list; "2.4" hides tags, "2.11" hides allowed_cidrs.
    octavia_version: str = "2.27"
    # Nova's maximum microversion; 2.1 returns flavor {"id"} like gophercloud sees it,
    # >= 2.47 embeds the flavor with `original_name`.
    nova_max_microversion: str = "2.1"
    # Routes per router, enforced as Neutron 29 does with its `router_route` quota (409
    # OverQuota; `quota_router_route` defaults to 30, replacing the `max_routes` option);
    # None = unlimited so the large route benchmarks are not capped.
    max_routes: int | None = None
    # Member addresses the health monitors report as down (operating_status ERROR).
    down_member_addresses: set[str] = field(default_factory=set)
    # Most rows one list answer holds; 0 = no cap. The defaults are the services' own
    # (Octavia's `[api_settings] pagination_max_limit`, Nova's `[api] max_limit`), so
    # a client that never follows `next` links loses rows here as it would in a cloud.
    octavia_page_limit: int = 1000
    nova_page_limit: int = 1000
    # Largest request body Octavia and Nova accept (413 above it); 0 = no limit. The
    # default is oslo.middleware's `[oslo_middleware] max_request_body_size` (112 KiB),
    # which a stock cloud applies and which a large cluster's operator raises.
    max_request_body_size: int = DEFAULT_MAX_REQUEST_BODY_SIZE
    # The password Keystone accepts for the seeded user now; "" = the one in the settings
    # (and in the written configs). Set it, then revoke the tokens, to rotate the password
    # under a running client as an operator would.
    keystone_password: str = ""

    def update(self, changes: dict[str, Any]) -> None:
        """Apply a partial update; unknown names or bad values raise ValueError."""
        names = {f.name for f in dataclasses.fields(self)}
        for name, value in changes.items():
            if name not in names:
                raise ValueError(f"unknown knob {name!r}")
            setattr(self, name, _coerce(name, value))

    def as_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["disabled_extensions"] = sorted(self.disabled_extensions)
        data["down_member_addresses"] = sorted(self.down_member_addresses)
        return data


@functools.lru_cache(maxsize=64)
def version_minor(version: str) -> int:
    """`"2.27"` → 27; the simulator only speaks major version 2 (asked on every field check)."""
    match = VERSION_RE.match(version)
    if match is None:
        raise ValueError(f"version {version!r} is not 2.N")
    return int(match.group(1))


def _coerce(name: str, value: Any) -> Any:  # noqa: PLR0911 - one case per knob type
    match name:
        case "latency_ms" | "latency_jitter_ms" | "retry_after_s" | "provisioning_delay_s":
            number = float(value)
            if number < 0:
                raise ValueError(f"{name} must be >= 0")
            return number
        case (
            "force_error_next_lbs"
            | "octavia_page_limit"
            | "nova_page_limit"
            | "max_request_body_size"
        ):
            return _non_negative_int(name, value)
        case "lb_quota" | "max_routes":
            return None if value is None else _non_negative_int(name, value)
        case "batch_members":
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be a boolean")
            return value
        case "disabled_extensions" | "down_member_addresses":
            return {str(item) for item in value}
        case "octavia_version" | "nova_max_microversion":
            version_minor(str(value))
            return str(value)
        case "error_rates":
            return _error_rates(value)
        case "keystone_password":
            return str(value)
        case "fail_next":
            return [rule if isinstance(rule, FailRule) else FailRule(**rule) for rule in value]
    raise ValueError(f"unknown knob {name!r}")


def _non_negative_int(name: str, value: Any) -> int:
    number = int(value)
    if number < 0:
        raise ValueError(f"{name} must be >= 0")
    return number


def _error_rates(value: Any) -> dict[str, dict[int, float]]:
    rates: dict[str, dict[int, float]] = {}
    for service, by_status in dict(value).items():
        if service not in SERVICES:
            raise ValueError(f"unknown service {service!r}")
        rates[service] = {int(status): float(rate) for status, rate in dict(by_status).items()}
    return rates
