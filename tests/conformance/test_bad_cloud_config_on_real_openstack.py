"""A cloud.conf that cannot work, on the real services: a Keystone that is down, a wrong
password, a cloud without Octavia in its catalog. Each must reach the operator as one clear
line (a log line and the upstream Warning event on the Service), never a traceback, never a
secret, and be retried with backoff, not in a hot loop."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyccm import lifetime
from pyccm.logs import parse_time
from pyccm_sim.demo import child
from tests.conformance.realcloud import TENANT, RealCloud, stop_process
from tests.support.tree import Kube
from tests.support.waiting import wait_for

pytestmark = pytest.mark.conformance

# A text log line: `TIME PROCESS LEVEL LOGGER: MSG`, the time in RFC 3339 UTC (pyccm.logs).
FAILED_LINE = re.compile(r"^(\S+) .*sync of default/svc-00000 failed: (.*)$", re.M)
WRONG_PASSWORD = "not-the-password-4711"


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kube, Path]]:
    workdir = tmp_path_factory.mktemp("kube")
    kubeconfig = workdir / "kubeconfig"
    arguments = ["sim", "kube", "--seed-nodes", "2", "--seed-services", "1"]
    with child([*arguments, "--kubeconfig-out", str(kubeconfig)], workdir / "kube.log"):
        client = Kube(kubeconfig)
        yield client, kubeconfig
        client.client.close()


def worker(kubeconfig: Path, cloud_conf: Path, log: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "pyccm", "worker", "service", "--standalone"]
    command += ["--kubeconfig", str(kubeconfig), "--cloud-config", str(cloud_conf)]
    with log.open("wb") as out:
        return lifetime.spawn(command, stdout=out, stderr=subprocess.STDOUT)


def failures(log: Path) -> list[tuple[float, str]]:
    found = []
    for stamp, message in FAILED_LINE.findall(log.read_text(errors="replace")):
        found.append((parse_time(stamp), message))
    return found


def warnings_on_the_service(kube: Kube) -> list[dict[str, Any]]:
    return [
        e
        for e in kube.events("SyncLoadBalancerFailed")
        if e["involvedObject"]["name"] == "svc-00000"
    ]


def check_one_clear_line(kube: Kube, log: Path, expected: str, *, secret: str) -> None:
    """The Warning and the log say `expected`; no traceback, no secret, and backoff."""
    # Earlier tests' workers left Warnings on the same Service: look at new ones only (a
    # new event, or an old one whose count went up), in no particular list order.
    before = {e["metadata"]["uid"]: e.get("count", 1) for e in warnings_on_the_service(kube)}

    def fresh() -> list[dict[str, Any]]:
        return [
            e
            for e in warnings_on_the_service(kube)
            if before.get(e["metadata"]["uid"]) != e.get("count", 1)
        ]

    (event, *_) = wait_for(
        fresh, timeout=60, what="a new SyncLoadBalancerFailed Warning on the Service"
    )
    message = event["message"]
    assert expected in message
    assert "\n" not in message
    # Retried with backoff, not in a loop: at start the Service's own event and the node
    # sweeps may each run it once within milliseconds (a node change re-syncs at once, as
    # upstream), but then the workqueue's backoff (5 s, 10 s, ...) spaces the attempts.
    wait_for(lambda: failures(log)[3:4], timeout=60, what="a fourth attempt")
    attempts = failures(log)
    start = attempts[0][0]
    assert len([t for t, _ in attempts if t - start < 4.0]) <= 3, attempts[:4]
    gaps = [later[0] - earlier[0] for earlier, later in itertools.pairwise(attempts[:4])]
    assert max(gaps) >= 4.0, attempts[:4]
    assert all(expected in m for _, m in attempts), attempts
    text = log.read_text(errors="replace")
    assert "Traceback" not in text
    assert secret not in text
    assert secret not in message


def bad_conf(real_cloud: RealCloud, tmp_path: Path, **replace: str) -> Path:
    text = real_cloud.cloud_conf_path.read_text()
    for key, value in replace.items():
        text = re.sub(rf"^{key} = .*$", f"{key} = {value}", text, flags=re.M)
    path = tmp_path / "cloud.conf"
    path.write_text(text)
    return path


def test_a_keystone_that_is_down(
    real_cloud: RealCloud, kube: tuple[Kube, Path], tmp_path: Path
) -> None:
    conf = bad_conf(real_cloud, tmp_path, **{"auth-url": "http://127.0.0.1:9/v3"})
    process = worker(kube[1], conf, tmp_path / "worker.log")
    try:
        check_one_clear_line(
            kube[0],
            tmp_path / "worker.log",
            "Failed to establish a new connection",
            secret=TENANT["password"],
        )
    finally:
        stop_process(process)


def test_a_wrong_password(real_cloud: RealCloud, kube: tuple[Kube, Path], tmp_path: Path) -> None:
    conf = bad_conf(real_cloud, tmp_path, password=WRONG_PASSWORD)
    process = worker(kube[1], conf, tmp_path / "worker.log")
    try:
        check_one_clear_line(kube[0], tmp_path / "worker.log", "HTTP 401", secret=WRONG_PASSWORD)
    finally:
        stop_process(process)


def test_octavia_missing_from_the_catalog(
    real_cloud: RealCloud, kube: tuple[Kube, Path], tmp_path: Path
) -> None:
    identity = real_cloud.connection("admin").identity
    (service,) = [s for s in identity.services() if s.type == "load-balancer"]
    endpoints = [
        (e.interface, e.url, e.region_id)
        for e in identity.endpoints()
        if e.service_id == service.id
    ]
    for endpoint in [e for e in identity.endpoints() if e.service_id == service.id]:
        identity.delete_endpoint(endpoint)
    process = worker(kube[1], real_cloud.cloud_conf_path, tmp_path / "worker.log")
    try:
        check_one_clear_line(
            kube[0],
            tmp_path / "worker.log",
            "no load-balancer endpoint in the service catalog",
            secret=TENANT["password"],
        )
    finally:
        stop_process(process)
        for interface, url, region in endpoints:
            identity.create_endpoint(
                service_id=service.id, interface=interface, url=url, region_id=region
            )
