"""The real OpenStack provider against a simulator process, for the provider-level benches
(`bench.routes_on_sim`, `bench.lifecycle_on_sim`): what they share."""

from __future__ import annotations

import json
import tempfile
import urllib.request
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from pyccm.provider.openstack import create_cloud
from pyccm.provider.openstack.cloud import OpenStackCloud
from pyccm.provider.settings import ProviderSettings
from pyccm_sim.demo import child


def openstack_on_sim(
    stack: ExitStack, *, nodes: int, latency_ms: float, prefix: str
) -> tuple[OpenStackCloud, str]:
    """A simulator process with `nodes` servers and `latency_ms` per call, and the provider
    on it (`--cloud-api-qps` 500, as the demo's tree); both end with `stack`. Returns the
    provider and the simulator's URL."""
    workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=prefix)))
    url = stack.enter_context(
        child(
            [
                *("sim", "openstack", "--seed-nodes", str(nodes)),
                *("--write-config", str(workdir), "--latency-ms", str(latency_ms)),
            ],
            workdir / "openstack.log",
        )
    )
    conf = workdir / "cloud.conf"
    provider = ProviderSettings(cloud_config=conf, cloud_api_qps=500.0, cloud_api_burst=500)
    cloud = create_cloud(settings=provider, registry=CollectorRegistry(), environ={})
    stack.callback(cloud.close)
    return cloud, url


def admin(url: str, path: str) -> Any:
    with urllib.request.urlopen(f"{url}/_sim{path}", timeout=60) as answer:
        return json.load(answer)


def call_kinds(url: str, since: int, *, service: Callable[[str], bool]) -> Counter[str]:
    """`METHOD /path` of every call since `since` to a service `service` accepts, ids
    folded to `{id}`."""
    kinds: Counter[str] = Counter()
    for call in admin(url, f"/calls?since={since}")["calls"]:
        if not service(call["service"]):
            continue
        parts = call["path"].split("?")[0].split("/")
        folded = "/".join("{id}" if len(p) == 36 and p.count("-") == 4 else p for p in parts)
        kinds[f"{call['method']} {folded}"] += 1
    return kinds
