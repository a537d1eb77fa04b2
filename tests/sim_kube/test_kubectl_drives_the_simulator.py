"""kubectl against the simulator (optional: skipped without kubectl). kubectl sends a
kubeconfig's token only over TLS, so this runs the simulator with `tls=True`."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyccm import lifetime
from pyccm_sim.kube.testing import KubeSimHandle, running_kube_sim

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]

SERVICE = """\
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: default
spec:
  type: LoadBalancer
  ports:
  - port: 80
"""


@pytest.fixture
def tls_kube() -> Iterator[KubeSimHandle]:
    with running_kube_sim(seed_nodes=2, seed_services=1, tls=True) as handle:
        yield handle


def kubectl(kube: KubeSimHandle, *args: str) -> str:
    result = subprocess.run(
        ["kubectl", "--kubeconfig", str(kube.kubeconfig_path), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return result.stdout


def test_kubectl_get_prints_server_side_columns(tls_kube: KubeSimHandle) -> None:
    lines = kubectl(tls_kube, "get", "nodes").splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert [line.split()[:2] for line in lines[1:]] == [
        ["node-0000", "Ready"],
        ["node-0001", "Ready"],
    ]


def test_kubectl_describe_node_shows_its_addresses(tls_kube: KubeSimHandle) -> None:
    text = kubectl(tls_kube, "describe", "node", "node-0000")
    assert "InternalIP:  10.0.0.10" in text
    assert "node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule" in text


def test_kubectl_patch_and_delete(tls_kube: KubeSimHandle) -> None:
    kubectl(
        tls_kube,
        "patch",
        "node",
        "node-0000",
        "-p",
        json.dumps({"metadata": {"labels": {"x": "y"}}}),
    )
    kubectl(
        tls_kube,
        "patch",
        "node",
        "node-0000",
        "--type=json",
        "-p",
        '[{"op": "remove", "path": "/spec/taints"}]',
    )
    node = tls_kube.get("nodes", "node-0000")
    assert node is not None
    assert node["metadata"]["labels"]["x"] == "y"
    assert "taints" not in node["spec"]
    kubectl(tls_kube, "delete", "node", "node-0001")
    assert tls_kube.get("nodes", "node-0001") is None


def test_kubectl_create_from_a_file_and_watch(tls_kube: KubeSimHandle, tmp_path: Path) -> None:
    manifest = tmp_path / "service.yaml"
    manifest.write_text(SERVICE)
    watcher = lifetime.spawn(
        [
            "kubectl",
            "--kubeconfig",
            str(tls_kube.kubeconfig_path),
            "get",
            "services",
            "-w",
            "-n",
            "default",
            "--request-timeout=20s",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while tls_kube.open_watches() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        kubectl(tls_kube, "create", "-f", str(manifest))
        assert tls_kube.get("services", "web", "default") is not None
        tls_kube.cut_watches()
        output, _ = watcher.communicate(timeout=20)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
        if watcher.stdout is not None:
            watcher.stdout.close()
    names = [line.split()[0] for line in output.splitlines()[1:]]
    assert names == ["svc-00000", "web"]
