"""A kube simulator per test module, and a pyccm KubeClient pointed at it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pyccm.kubeapi.client import KubeClient, KubeSettings
from pyccm_sim.kube.testing import KubeSimHandle, running_kube_sim


@pytest.fixture
def kube() -> Iterator[KubeSimHandle]:
    with running_kube_sim(seed_nodes=3, seed_services=2) as handle:
        yield handle


@pytest.fixture
def client(kube: KubeSimHandle) -> Iterator[KubeClient]:
    client = KubeClient(
        settings=KubeSettings(kubeconfig=str(kube.kubeconfig_path), qps=1000, burst=1000)
    )
    yield client
    client.close()
