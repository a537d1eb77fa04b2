"""`pyccm --version` names pyccm's version, every registered cloud provider and the versions
of Python and of the libraries a bug report needs, one `NAME VERSION` per line, exit 0."""

from __future__ import annotations

import platform
import subprocess
import sys
from importlib.metadata import entry_points, version

import zmq

import pyccm
from pyccm.cli import LIBRARIES

# What a reader of a bug report looks for, whatever LIBRARIES says.
EXPECTED = (
    "openstacksdk",
    "keystoneauth1",
    "urllib3",
    "pyzmq",
    "msgspec",
    "prometheus-client",
    "supervisor",
)


def version_lines() -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pyccm", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout.splitlines()


def test_the_version_report_names_pyccm_the_providers_and_the_libraries() -> None:
    lines = version_lines()
    assert lines[0] == f"pyccm {pyccm.__version__}" == f"pyccm {version('pyccm')}" == "pyccm 0.1.0"
    providers = {ep.name: ep.value for ep in entry_points(group="pyccm.providers")}
    assert set(providers) >= {"openstack", "fake"}
    for name, target in providers.items():
        assert f"provider {name} {target}" in lines
    assert f"python {platform.python_version()} ({platform.python_implementation()})" in lines
    assert set(EXPECTED) <= set(LIBRARIES)
    for library in EXPECTED:
        assert f"{library} {version(library)}" in lines
    assert f"libzmq {zmq.zmq_version()}" in lines
    assert len(lines) == len(set(lines))
