"""kubectl as the client of the secure port (`kubectl get --raw`), the way an operator
checks what a scraper would see: it verifies the served certificate against the one in
`--cert-dir` and sends a bearer token (optional: skipped without kubectl)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pyccm.manager.serving import ServingSettings
from tests.support.https import GARBAGE_TOKEN, PAIR, READER_TOKEN, STRANGER_TOKEN, serving

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]


@dataclass(frozen=True)
class Port:
    url: str
    cert: Path


@pytest.fixture
def port(ccm_kubeconfig: Path, tmp_path: Path) -> Iterator[Port]:
    with serving(ccm_kubeconfig, serving=ServingSettings(port=0, cert_dir=str(tmp_path))) as s:
        yield Port(f"https://127.0.0.1:{s.port}", tmp_path / f"{PAIR}.crt")


def kubectl_raw(port: Port, path: str, token: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *("kubectl", "--kubeconfig=/dev/null", f"--server={port.url}"),
            f"--certificate-authority={port.cert}",
            f"--token={token}",
            *("get", "--raw", path),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_kubectl_reads_metrics_with_an_allowed_token(port: Port) -> None:
    result = kubectl_raw(port, "/metrics", READER_TOKEN)
    assert result.returncode == 0, result.stderr
    assert "# TYPE apiserver_delegated_authz_request_total counter" in result.stdout


@pytest.mark.parametrize(
    ("token", "says"), [(GARBAGE_TOKEN, "Unauthorized"), (STRANGER_TOKEN, "Forbidden")]
)
def test_kubectl_is_refused_without_the_right_token(port: Port, token: str, says: str) -> None:
    result = kubectl_raw(port, "/metrics", token)
    assert result.returncode != 0
    assert says in result.stderr
    assert token not in result.stderr
