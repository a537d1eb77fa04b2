"""Fixtures every folder may use, loaded by the root tests/conftest.py (`pytest_plugins`).

OpenStack simulators: one per seed per test session (per xdist worker), started the first
time a test asks for that seed and returned to its seeded state before every test. A folder
or module picks its cloud by overriding `openstack_seed` (tests/provider: four nodes; the
dual-stack modules: a dual-stack tenant network); the default is twelve nodes.

The kube simulator of the `pyccm` command's tests (gc, plan): one per module, unseeded;
folders that need another (seeded, with RBAC) override `kube`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from pyccm.kubeapi.client import KubeClient, KubeSettings
from pyccm.kubeapi.cluster import read_cluster_id
from pyccm.provider.interface import LoadBalancers
from pyccm.provider.openstack.cloud import OpenStackCloud
from pyccm.provider.openstack.config import load_settings
from pyccm.provider.openstack.loadbalancer.api import Api
from pyccm.provider.openstack.transport.client import build_client
from pyccm.provider.settings import ProviderSettings
from pyccm_sim.kube.testing import KubeSimHandle, running_kube_sim
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import MakeLbs
from tests.support.openstack import CloudUnderTest, MakeCloud, OpenStackSims

# The default seed: twelve nodes, load balancers ACTIVE at once.
LB_SEED: dict[str, Any] = {"seed_nodes": 12, "provisioning_delay_s": 0.0}


@pytest.fixture(scope="session")
def openstack_sims() -> Iterator[OpenStackSims]:
    with ExitStack() as stack:
        yield OpenStackSims(stack)


@pytest.fixture
def openstack_seed() -> dict[str, Any]:
    """The seed of `openstack_sim`: `running_openstack_sim`'s options (override to change)."""
    return LB_SEED


@pytest.fixture
def openstack_sim(
    openstack_sims: OpenStackSims, openstack_seed: dict[str, Any]
) -> OpenStackSimHandle:
    """The session's simulator of this seed, as the previous test left it."""
    return openstack_sims.get(openstack_seed)


@pytest.fixture
def sim(openstack_sim: OpenStackSimHandle) -> OpenStackSimHandle:
    """The simulator in its seeded state; load balancers ACTIVE at once."""
    openstack_sim.reset()
    # reset() restores the default knobs (50 ms provisioning); these tests run at zero.
    openstack_sim.set_knobs(provisioning_delay_s=0.0)
    return openstack_sim


@pytest.fixture
def make_cloud(sim: OpenStackSimHandle, tmp_path: Path) -> Iterator[MakeCloud]:
    """`make_cloud("[Route]\\nrouter-id = x")`: the OpenStack provider on the simulator's
    `cloud.conf` plus `extra`, with its own metrics registry and a recording `sleep`."""
    built: list[CloudUnderTest] = []

    def make(
        extra: str = "",
        *,
        conf: str | None = None,
        qps: float = 1000.0,
        burst: int = 1000,
        environ: dict[str, str] | None = None,
        cluster: str = "kubernetes",
        cluster_id: str = "",
    ) -> CloudUnderTest:
        path = tmp_path / f"cloud-{len(built)}.conf"
        base = sim.cloud_conf_path.read_text() if conf is None else conf
        path.write_text(base + "\n" + extra + "\n")
        provider_settings = ProviderSettings(
            cloud_config=path,
            cluster_name=cluster,
            cluster_id=cluster_id,
            cloud_api_qps=qps,
            cloud_api_burst=burst,
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


@pytest.fixture
def make_lbs(make_cloud: MakeCloud) -> MakeLbs:
    """`make_lbs("[LoadBalancer]\\ncreate-monitor = true")`: a fresh provider's load
    balancers (no memory); `cluster` and `cluster_id` as `make_cloud` takes them."""

    def make(extra: str = "", *, conf: str | None = None, **cluster: str) -> LoadBalancers:
        lbs = make_cloud(extra, conf=conf, **cluster).cloud.load_balancers()
        assert lbs is not None
        return lbs

    return make


@pytest.fixture
def lbs(make_lbs: MakeLbs) -> LoadBalancers:
    return make_lbs()


@pytest.fixture
def api(sim: OpenStackSimHandle) -> Iterator[Api]:
    """The load-balancer code's REST calls alone, on the simulator's own `cloud.conf`."""
    provider_settings = ProviderSettings(
        cloud_config=sim.cloud_conf_path, cloud_api_qps=1000.0, cloud_api_burst=1000
    )
    settings = load_settings(sim.cloud_conf_path, environ={})
    client = build_client(
        settings=settings,
        provider_settings=provider_settings,
        registry=CollectorRegistry(),
        sleep=lambda _: None,
    )
    yield Api(client=client)
    client.close()


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeSimHandle]:
    with running_kube_sim() as handle:
        yield handle


@pytest.fixture
def cluster_id(kube: KubeSimHandle) -> str:
    client = KubeClient(settings=KubeSettings(kubeconfig=str(kube.kubeconfig_path)))
    try:
        return read_cluster_id(client)
    finally:
        client.close()
