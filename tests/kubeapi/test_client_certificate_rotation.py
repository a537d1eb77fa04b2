"""Client certificate files rotated under a running client are picked up as client-go
picks them up: within about a second, on new connections, the idle old ones closed; a
rotation caught half written keeps the last good pair. The TLS simulator authenticates
each request by the certificate its connection presented (the user is its CN), so the
request log shows which certificate each connection carried."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyccm.kubeapi.client import KubeClient, KubeSettings
from pyccm.kubeapi.credentials import Reread
from tests.support.certificates import issue_client
from tests.support.kubeconfigs import (
    CERT_USER,
    Authenticating,
    authenticating_sim,
    b64,
    who_is,
    write_kubeconfig,
)
from tests.support.waiting import wait_for

ROTATED_USER = "rotated-user"


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[Authenticating]:
    with authenticating_sim(tmp_path / "pki") as sim:
        yield sim


def _install(source: Path, target: Path) -> None:
    """As a certificate manager writes a file: a new file renamed over the old."""
    staged = target.with_name(f".{target.name}.new")
    shutil.copy(source, staged)
    staged.replace(target)


@pytest.fixture
def files(sim: Authenticating, tmp_path: Path) -> tuple[Path, Path]:
    directory = tmp_path / "kube" / "pki"
    directory.mkdir(parents=True)
    cert, key = sim.client
    _install(cert, directory / "client.crt")
    _install(key, directory / "client.key")
    return directory / "client.crt", directory / "client.key"


@pytest.fixture
def client(sim: Authenticating, files: tuple[Path, Path]) -> Iterator[KubeClient]:
    cert = files[0]
    kubeconfig = write_kubeconfig(
        cert.parent.parent / "config",
        cluster={"server": sim.kube.url, "certificate-authority-data": b64(sim.server_ca())},
        user={"client-certificate": "pki/client.crt", "client-key": "pki/client.key"},
    )
    client = KubeClient(settings=KubeSettings(kubeconfig=str(kubeconfig), qps=1000, burst=1000))
    yield client
    client.close()


def test_rotated_certificate_files_are_who_new_connections_are(
    sim: Authenticating, files: tuple[Path, Path], client: KubeClient, tmp_path: Path
) -> None:
    assert who_is(client, sim.kube) == CERT_USER
    new_cert, new_key = issue_client(tmp_path / "pki", sim.ca, ROTATED_USER)
    _install(new_cert, files[0])
    _install(new_key, files[1])
    wait_for(
        lambda: who_is(client, sim.kube) == ROTATED_USER,
        timeout=10,
        what="a request authenticated by the rotated certificate",
    )
    # The old pool's idle connections are closed: no request goes out on one of them again.
    mark = len(sim.kube.requests())
    for _ in range(5):
        who_is(client, sim.kube)
    assert {r["user"] for r in sim.kube.requests()[mark:]} == {ROTATED_USER}


def test_a_rotation_caught_half_written_keeps_the_last_good_pair(
    sim: Authenticating,
    files: tuple[Path, Path],
    client: KubeClient,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert who_is(client, sim.kube) == CERT_USER
    new_cert, new_key = issue_client(tmp_path / "pki", sim.ca, ROTATED_USER)
    with caplog.at_level(logging.WARNING, logger="pyccm.kubeapi.credentials"):
        _install(new_cert, files[0])  # the key not yet: they do not load together
        wait_for(
            lambda: who_is(client, sim.kube) == CERT_USER and "do not load together" in caplog.text,
            timeout=10,
            what="a re-read of the mismatched pair, refused, the old one still used",
        )
    assert "cannot re-read the client certificate" in caplog.text
    _install(new_key, files[1])
    wait_for(
        lambda: who_is(client, sim.kube) == ROTATED_USER,
        timeout=10,
        what="a request authenticated by the completed rotation",
    )


def test_files_are_read_again_once_the_period_has_passed() -> None:
    now = [0.0]
    reads: list[int] = []

    def read() -> int:
        reads.append(len(reads) + 1)
        return reads[-1]

    value = Reread(0, read, period=1.0, what="a counter", clock=lambda: now[0])
    assert [value.get() for _ in range(3)] == [0, 0, 0]
    now[0] = 0.999
    assert value.get() == 0
    now[0] = 1.0
    assert value.get() == 1
    assert value.get() == 1
    assert value.again() == 2
    assert reads == [1, 2]
