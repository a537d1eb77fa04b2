"""`pyccm sim openstack` as a process: one ready line, working configs, clean exit on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import requests

from pyccm import lifetime
from pyccm_sim.openstack.cli import READY_PREFIX


def test_process_prints_one_ready_line_serves_and_exits_zero_on_sigterm(tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "pyccm.cli",
        "sim",
        "openstack",
        "--port",
        "0",
        "--seed-nodes",
        "3",
        "--seed-shutoff",
        "1",
        "--write-config",
        str(tmp_path),
        "--octavia-version",
        "2.4",
    ]
    with lifetime.spawn(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None
        try:
            line = process.stdout.readline().strip()
            url = line.removeprefix(READY_PREFIX).split(" ")[0]
            health = requests.get(f"{url}/_sim/health", timeout=5).json()
            versions = requests.get(f"{url}/load-balancer/", timeout=5).json()["versions"]
            inventory = requests.get(f"{url}/_sim/counters", timeout=5).json()["inventory"]
        finally:
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=20)
        rest = process.stdout.read()

    assert line == f"{READY_PREFIX}{url} (config: {tmp_path})"
    assert health == {"ok": True}
    assert versions[-1]["id"] == "v2.4"
    assert inventory["server"] == 3
    assert (tmp_path / "clouds.yaml").exists()
    assert (tmp_path / "cloud.conf").exists()
    assert code == 0
    assert rest == ""


def test_bad_knob_value_is_a_one_line_error_and_exit_2(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "pyccm.cli", "sim", "openstack", "--octavia-version", "3.0"]

    result = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)

    assert result.returncode == 2
    assert result.stderr.strip() == "pyccm sim openstack: version '3.0' is not 2.N"
