"""The README's first command: `pyccm demo` converges, prints the table and exits 0."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


def test_the_demo_initializes_every_node_and_exits_zero() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pyccm", "demo", "--nodes", "3", "--timeout", "90"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "nodes initialized: 3/3" in result.stdout
    table = [line for line in result.stdout.splitlines() if line.startswith("node-")]
    assert len(table) == 3
    assert all("openstack:///" in line and "InternalIP=10.0.0." in line for line in table)
