"""One OpenStack simulator per test session, reset to its seeded cloud before each test.

`make_cloud` builds the OpenStack provider against it from the simulator's own
`cloud.conf` (plus extra sections a test appends), with its own metrics registry and a
recording `sleep`, so throttling and Retry-After waits are observed instead of slept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from pyccm.protocol.views import Node, NodeAddress, NodeSpec, NodeStatus, OwnerMeta
from pyccm.provider.openstack.client import build_client
from pyccm.provider.openstack.cloud import OpenStackCloud
from pyccm.provider.openstack.config import load_settings
from pyccm.provider.settings import ProviderSettings
from pyccm.sim.openstack.testing import OpenStackSimHandle, running_openstack_sim

SEED_NODES = 4


@pytest.fixture(scope="session")
def openstack_sim() -> Iterator[OpenStackSimHandle]:
    with running_openstack_sim(seed_nodes=SEED_NODES, provisioning_delay_s=0.0) as handle:
        yield handle


@pytest.fixture
def sim(openstack_sim: OpenStackSimHandle) -> OpenStackSimHandle:
    openstack_sim.reset()
    return openstack_sim


@dataclass
class CloudUnderTest:
    cloud: OpenStackCloud
    registry: CollectorRegistry
    slept: list[float] = field(default_factory=list)

    def metric(self, name: str, request: str) -> float:
        value = self.registry.get_sample_value(name, {"request": request})
        return value or 0.0


MakeCloud = Callable[..., CloudUnderTest]


@pytest.fixture
def make_cloud(sim: OpenStackSimHandle, tmp_path: Path) -> Iterator[MakeCloud]:
    built: list[CloudUnderTest] = []

    def make(
        extra: str = "",
        *,
        conf: str | None = None,
        qps: float = 1000.0,
        burst: int = 1000,
        environ: dict[str, str] | None = None,
    ) -> CloudUnderTest:
        path = tmp_path / f"cloud-{len(built)}.conf"
        path.write_text((sim.cloud_conf_path.read_text() if conf is None else conf) + "\n" + extra)
        provider_settings = ProviderSettings(
            cloud_config=path, cloud_api_qps=qps, cloud_api_burst=burst
        )
        settings = load_settings(path, environ=environ or {})
        registry = CollectorRegistry()
        slept: list[float] = []
        client = build_client(
            settings=settings,
            provider_settings=provider_settings,
            registry=registry,
            sleep=slept.append,
        )
        cloud = OpenStackCloud(
            client=client, settings=settings, provider_settings=provider_settings
        )
        under_test = CloudUnderTest(cloud=cloud, registry=registry, slept=slept)
        built.append(under_test)
        return under_test

    yield make
    for under_test in built:
        under_test.cloud.close()


def node(name: str, *, provider_id: str = "", addresses: tuple[tuple[str, str], ...] = ()) -> Node:
    return Node(
        metadata=OwnerMeta(name=name, uid=f"uid-{name}"),
        spec=NodeSpec(provider_id=provider_id),
        status=NodeStatus(addresses=tuple(NodeAddress(type=t, address=a) for t, a in addresses)),
    )


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
