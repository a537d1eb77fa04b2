"""The README's first command: `pyccm demo` converges, prints the summary and exits 0."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pyccm import lifetime

pytestmark = pytest.mark.e2e


def test_the_demo_does_the_whole_mission_and_exits_zero() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pyccm", "demo", "--nodes", "3", "--services", "2"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        **lifetime.tied(),  # a killed pytest takes it, and so all it started, with it
    )
    assert result.returncode == 0, result.stdout + result.stderr
    final = result.stdout.split("\r")[-1]
    assert "nodes initialized 3/3" in final
    assert "services with a load balancer 2/2" in final
    assert "pod routes 3/3" in final
    lines = result.stdout.splitlines()
    nodes = [line for line in lines if line.startswith("node-")]
    assert len(nodes) == 3
    assert all("openstack:///" in line and "InternalIP=10.0.0." in line for line in nodes)
    services = [line for line in lines if "/svc-" in line and "ACTIVE" in line]
    assert len(services) == 2
    routes = [line for line in lines if line.startswith("10.64.")]
    assert len(routes) == 3
    assert "its load balancer and its floating IP are gone" in result.stdout
    # pyccm plan: the annotation's change, as pool updates, before anyone makes it.
    assert "$ pyccm plan service" in result.stdout
    assert "update  pool" in result.stdout
    assert "lb_algorithm: LEAST_CONNECTIONS" in result.stdout
    # pyccm gc: the orphan left on purpose is listed by the dry run, then deleted.
    dry_run, _, deleting = result.stdout.partition("$ pyccm gc --yes")
    assert "kube_service_demo_default_leaked" in dry_run.partition("$ pyccm gc --dry-run")[2]
    assert "dry run: nothing was deleted" in dry_run
    assert "deleted" in deleting
    assert "the orphan is gone" in result.stdout
