"""A fresh kube simulator per test (it starts in milliseconds) and the official client
pointed at it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pyccm_sim.kube.testing import KubeSimHandle, running_kube_sim
from tests.support.kube_http import api_client, client


@pytest.fixture
def kube() -> Iterator[KubeSimHandle]:
    with running_kube_sim(seed_nodes=3, seed_services=4, bookmark_interval=0.2) as handle:
        yield handle


@pytest.fixture
def core(kube: KubeSimHandle) -> Any:
    return client.CoreV1Api(api_client(kube))
