"""A kube simulator with the CCM's RBAC and the identities of tests/support/https.py (one
per module), and a kubeconfig with the CCM ServiceAccount's token."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pyccm_sim.kube.runtime import write_kubeconfig
from pyccm_sim.kube.settings import User
from pyccm_sim.kube.testing import KubeSimHandle, running_kube_sim
from tests.support.https import (
    CCM_TOKEN,
    CCM_USER,
    METRICS_READER,
    RBAC,
    READER_TOKEN,
    READER_USER,
    STRANGER_TOKEN,
    STRANGER_USER,
)


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeSimHandle]:
    reader = tmp_path_factory.mktemp("rbac") / "metrics-reader.yaml"
    reader.write_text(METRICS_READER)
    tokens = (
        (CCM_TOKEN, User(CCM_USER)),
        (READER_TOKEN, User(READER_USER)),
        (STRANGER_TOKEN, User(STRANGER_USER)),
    )
    with running_kube_sim(rbac_files=(RBAC, reader), tokens=tokens) as handle:
        yield handle


@pytest.fixture(scope="module")
def ccm_kubeconfig(kube: KubeSimHandle, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kubeconfig with the CCM ServiceAccount's token (not the admin's)."""
    path = tmp_path_factory.mktemp("ccm") / "kubeconfig"
    write_kubeconfig(path, url=kube.url, token=CCM_TOKEN, user="cloud-controller-manager")
    return path
