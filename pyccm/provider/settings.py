"""What every provider factory is given: the process-wide settings from flags.

One frozen object per process, built by the command line from its flags and passed by
keyword (docs/architecture.md#style-settings-objects). Provider-specific configuration (OpenStack's
`cloud.conf`) is read by
the provider itself from `cloud_config`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class ProviderSettings:
    # `--cloud-config`: upstream's flag; None lets a provider that needs no file (fake) start.
    cloud_config: Path | None = None
    # `--cluster-name`: upstream's default, embedded in load-balancer names and tags.
    cluster_name: str = "kubernetes"
    # `--cluster-id`: unique per cluster (the `kube-system` namespace UID), written in the
    # tags of every cloud resource pyccm creates so that two clusters with the same
    # `--cluster-name` never adopt or delete each other's
    # (kubernetes/cloud-provider-openstack#3102). "" (no identity known) keeps upstream's
    # ownership by name alone.
    cluster_id: str = ""
    # `--cloud-api-qps` / `--cloud-api-burst`: one token bucket per process for every cloud
    # call. 20/s sustained with bursts of 40 keeps a 10-thread service worker busy without
    # tripping the default rate limits of a public cloud's API gateways.
    cloud_api_qps: float = 20.0
    cloud_api_burst: int = 40
    # Extra User-Agent tokens (`--user-agent`, repeatable upstream).
    user_agent: tuple[str, ...] = ()
