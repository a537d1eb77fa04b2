"""`--bus-advertise-address`: the addresses a manager advertises are its host with the ports
it binds; an address that cannot be advertised is one line and exit code 2 at start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pyccm.flags.addresses import advertised, parse_endpoints
from pyccm.keys_command import generate


@pytest.mark.parametrize(
    ("host", "pub", "router", "expected"),
    [
        (
            "10.0.0.5",
            "tcp://*:5556",
            "tcp://0.0.0.0:5557",
            ("tcp://10.0.0.5:5556", "tcp://10.0.0.5:5557"),
        ),
        (
            "fd00::5",
            "tcp://[::]:5556",
            "tcp://*:5557",
            ("tcp://[fd00::5]:5556", "tcp://[fd00::5]:5557"),
        ),
        (
            "ccm-0.ccm",
            "tcp://eth0:6000",
            "tcp://eth0:6001",
            ("tcp://ccm-0.ccm:6000", "tcp://ccm-0.ccm:6001"),
        ),
    ],
    ids=["ipv4", "ipv6", "name"],
)
def test_the_advertised_addresses_are_the_host_with_the_bound_ports(
    host: str, pub: str, router: str, expected: tuple[str, str]
) -> None:
    assert advertised(host, pub, router) == expected
    assert parse_endpoints(",".join(expected)) == expected


@pytest.mark.parametrize(
    "text", ["", "tcp://a:1", "tcp://a:1,tcp://a:2,tcp://a:3", "ipc:///x,ipc:///y"]
)
def test_an_annotation_that_is_not_two_tcp_addresses_names_no_leader(text: str) -> None:
    assert parse_endpoints(text) is None


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        ((), "--bus-pub"),
        (("--bus-pub=tcp://127.0.0.1:*", "--bus-router=tcp://127.0.0.1:5557"), "--bus-pub"),
        (("--bus-pub=tcp://127.0.0.1:5556", "--bus-router=tcp://127.0.0.1:0"), "--bus-router"),
    ],
    ids=["ipc", "ephemeral-port", "port-0"],
)
def test_an_address_that_cannot_be_advertised_stops_the_manager_with_exit_2(
    tmp_path: Path, flags: tuple[str, ...], named: str
) -> None:
    generate(tmp_path / "keys", ["node"], force=False)
    result = subprocess.run(
        [
            *(sys.executable, "-m", "pyccm", "manager", "--secure-port=0"),
            f"--runtime-dir={tmp_path}/run",
            f"--bus-curve-dir={tmp_path / 'keys' / 'manager'}",
            "--bus-advertise-address=10.0.0.5",
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert len(lines) == 1, lines
    assert result.stdout == ""
    assert lines[0].startswith("pyccm manager: --bus-advertise-address needs ")
    assert named in lines[0]


def test_a_host_that_is_not_one_stops_the_manager_with_exit_2(tmp_path: Path) -> None:
    generate(tmp_path / "keys", ["node"], force=False)
    result = subprocess.run(
        [
            *(sys.executable, "-m", "pyccm", "manager", "--secure-port=0"),
            *("--bus-pub=tcp://127.0.0.1:5556", "--bus-router=tcp://127.0.0.1:5557"),
            f"--bus-curve-dir={tmp_path / 'keys' / 'manager'}",
            "--bus-advertise-address=10.0.0.5,10.0.0.6",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "is not a host name or IP address" in result.stdout + result.stderr
