"""`pyccm keys secrets | kubectl apply -f -` against the kube simulator, as BUS.md's rotation
procedure runs it: the stored Secrets decode to the key files, an added worker key reaches
the authorized Secret, and a removed one leaves it on the next apply."""

from __future__ import annotations

import base64
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyccm.keys_command import add_worker, generate
from pyccm_sim.kube.testing import KubeSimHandle, running_kube_sim

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]


@pytest.fixture
def kube() -> Iterator[KubeSimHandle]:
    # kubectl sends a kubeconfig's token only over TLS.
    with running_kube_sim(tls=True) as handle:
        yield handle


def apply_secrets(kube: KubeSimHandle, keys: Path, cache: Path) -> str:
    manifests = subprocess.run(
        [sys.executable, "-m", "pyccm", "keys", "secrets", str(keys)],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    applied = subprocess.run(
        [
            *("kubectl", "--kubeconfig", str(kube.kubeconfig_path), "--cache-dir", str(cache)),
            *("apply", "-f", "-"),
        ],
        input=manifests,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert applied.returncode == 0, applied.stderr.decode()
    return applied.stdout.decode()


def secret_files(kube: KubeSimHandle, name: str) -> dict[str, bytes]:
    secret = kube.get("secrets", name, "kube-system")
    assert secret is not None, name
    return {key: base64.b64decode(value) for key, value in secret["data"].items()}


def test_applied_secrets_hold_the_files_and_follow_added_and_removed_keys(
    kube: KubeSimHandle, tmp_path: Path
) -> None:
    keys, cache = tmp_path / "bus-keys", tmp_path / "kubectl-cache"
    generate(keys, ["node", "route"], force=False)
    printed = apply_secrets(kube, keys, cache)
    assert "secret/pyccm-bus-manager created" in printed
    manager = keys / "manager"
    assert secret_files(kube, "pyccm-bus-manager") == {
        "server.key_secret": (manager / "server.key_secret").read_bytes()
    }
    assert secret_files(kube, "pyccm-bus-worker-route") == {
        name: (keys / "workers" / "route" / name).read_bytes()
        for name in ("server.key", "client.key_secret")
    }
    # Rotation, step 1: a new key for the node workers, next to the old one.
    add_worker(keys, "node-2", force=False)
    apply_secrets(kube, keys, cache)
    assert set(secret_files(kube, "pyccm-bus-authorized")) == {
        "node.key",
        "node-2.key",
        "route.key",
    }
    # Step 3: the old key goes from the directory, and so from the Secret.
    (manager / "authorized" / "node.key").unlink()
    shutil.rmtree(keys / "workers" / "node")
    apply_secrets(kube, keys, cache)
    assert secret_files(kube, "pyccm-bus-authorized") == {
        name: (manager / "authorized" / name).read_bytes() for name in ("node-2.key", "route.key")
    }
