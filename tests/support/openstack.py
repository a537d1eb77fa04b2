"""The OpenStack provider built against the OpenStack simulator (tests/provider, the
lifecycle and route controllers' simulator tests), and what the simulator's public seeding
helpers cannot make.

The `make_cloud` fixture (tests/support/fixtures.py) builds the provider from the
simulator's own `cloud.conf` (plus extra sections a test appends), with its own metrics
registry and a recording `sleep`, so throttling and Retry-After waits are observed instead
of slept.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry

from pyccm.provider.openstack.cloud import OpenStackCloud
from pyccm_sim.openstack.testing import OpenStackSimHandle, running_openstack_sim

# The provider tests' cloud (tests/provider, the lifecycle and route controllers): four
# nodes; its tests name servers past them (node-0007) and count on four.
SMALL_SEED: dict[str, Any] = {"seed_nodes": 4, "provisioning_delay_s": 0.0}
SEED_NODES = SMALL_SEED["seed_nodes"]
# A tenant network with an IPv4 and an IPv6 subnet (tests/provider_lb's dual-stack modules).
DUAL_STACK_SEED: dict[str, Any] = {"seed_nodes": 4, "provisioning_delay_s": 0.0, "dual_stack": True}


class OpenStackSims:
    """Simulators by seed, each started once and kept until the session ends."""

    def __init__(self, stack: ExitStack) -> None:
        self._stack = stack
        self._running: dict[str, OpenStackSimHandle] = {}

    def get(self, seed: dict[str, Any]) -> OpenStackSimHandle:
        key = repr(sorted(seed.items()))
        if key not in self._running:
            self._running[key] = self._stack.enter_context(running_openstack_sim(**seed))
        return self._running[key]


@dataclass
class CloudUnderTest:
    cloud: OpenStackCloud
    registry: CollectorRegistry
    slept: list[float] = field(default_factory=list)

    def metric(self, name: str, request: str) -> float:
        value = self.registry.get_sample_value(name, {"request": request})
        return value or 0.0


MakeCloud = Callable[..., CloudUnderTest]


def create_server(sim: OpenStackSimHandle, name: str, **fields: Any) -> dict[str, Any]:
    """A server with any name, metadata or access IPs, and a port with a dynamic address.

    Workaround: the simulator's public seeding helper only creates servers for scenario
    node indexes (fixed name and IP), so this reaches its Nova model through the handle.
    """
    seeded = sim.seeded

    def create() -> dict[str, Any]:
        nova = sim._cloud.nova
        return dict(
            nova.create_server(
                name,
                flavor_id=seeded.flavor_id,
                zone="nova",
                network_id=seeded.private_network_id,
                fixed_ip=None,
                **fields,
            )
        )

    return sim._on_loop(create)
