"""Where a worker's cluster id comes from: `--cluster-id`, else the kube-system UID read
from the API server; a worker that cannot read it runs without one (one warning), while
`pyccm gc` and `pyccm plan` refuse to run without one (exit 2)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pyccm.kubeapi.client import KubeClient, KubeSettings
from pyccm.kubeapi.cluster import read_cluster_id
from pyccm.provider.errors import ConfigError
from pyccm.workers.runtime.identity import resolve_cluster_id
from pyccm_sim.kube.testing import KubeSimHandle, running_kube_sim


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeSimHandle]:
    with running_kube_sim() as handle:
        yield handle


def test_the_flag_wins_else_the_kube_system_uid_is_read(kube: KubeSimHandle) -> None:
    kubeconfig = str(kube.kubeconfig_path)
    assert resolve_cluster_id(given="given", kubeconfig=kubeconfig, required=True) == "given"
    uid = kube.get("namespaces", "kube-system")
    assert uid is not None
    read = resolve_cluster_id(given="", kubeconfig=kubeconfig, required=True)
    assert read == uid["metadata"]["uid"]
    client = KubeClient(settings=KubeSettings(kubeconfig=kubeconfig))
    try:
        assert read_cluster_id(client) == read
    finally:
        client.close()


def test_an_unreadable_id_is_a_warning_for_a_worker_and_an_error_for_the_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    broken = tmp_path / "kubeconfig"
    broken.write_text("not: a kubeconfig\n")
    assert resolve_cluster_id(given="", kubeconfig=str(broken), required=False) == ""
    assert "cannot read the cluster id" in caplog.text
    assert resolve_cluster_id(given="", kubeconfig="", required=False) == ""
    with pytest.raises(ConfigError, match="--cluster-id"):
        resolve_cluster_id(given="", kubeconfig=str(broken), required=True)
