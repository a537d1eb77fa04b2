"""The `openstack` CLI (python-openstackclient + octaviaclient) works against the simulator."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pyccm_sim.openstack.testing import OpenStackSimHandle

from .test_octavia_load_balancers import _tree, wait_for


def _openstack_binary() -> str | None:
    beside_python = Path(sys.executable).parent / "openstack"
    return str(beside_python) if beside_python.exists() else shutil.which("openstack")


BINARY = _openstack_binary()
pytestmark = [
    pytest.mark.openstackcli,
    pytest.mark.skipif(BINARY is None, reason="the openstack CLI is not installed"),
]


def _cli(sim: OpenStackSimHandle, *args: str, output: bool = True) -> Any:
    """Run `openstack ARGS` against the simulator; its JSON output when `output`."""
    assert BINARY is not None
    env = {key: value for key, value in os.environ.items() if not key.startswith("OS_")}
    env["OS_CLIENT_CONFIG_FILE"] = str(sim.clouds_yaml_path)
    formatting = ["-f", "json"] if output else []
    result = subprocess.run(
        [BINARY, "--os-cloud", sim.cloud_name, *args, *formatting],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if output else None


def test_server_list_shows_the_seeded_nodes(sim: OpenStackSimHandle) -> None:
    servers = _cli(sim, "server", "list")

    assert sorted(s["Name"] for s in servers) == [
        "node-0000",
        "node-0001",
        "node-0003",
        "node-0004",
        "node-0005",
    ]
    assert {s["Name"]: s["Status"] for s in servers}["node-0001"] == "SHUTOFF"


def test_loadbalancer_list_shows_a_created_load_balancer(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    lb = wait_for(conn, conn.load_balancer.create_load_balancer(**_tree(sim)).id)

    listed = _cli(sim, "loadbalancer", "list")

    assert [(x["id"], x["provisioning_status"]) for x in listed] == [(lb.id, "ACTIVE")]
