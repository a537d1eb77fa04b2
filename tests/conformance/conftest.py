"""The conformance tier (`make conformance`, marker `conformance`): one real OpenStack
(Keystone, Neutron, Octavia, Nova from PyPI, on sqlite, loopback) per test session.

Not part of `make test`: it needs the services' venvs, which `conformance/install.py`
builds once per machine and release. The release is `$OPENSTACK_RELEASE` (`make conformance
OPENSTACK_RELEASE=2024.1`), else the newest pinned one; docs/openstack-releases.md has what
each release was measured to do. The session's directory (configs, databases, access logs, every
service's log) stays under pytest's temporary directory for the reader of a failure.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conformance.realcloud import RealCloud, release, running_real_cloud, venv_root

# node-0000..node-0002 are the cluster's nodes; node-0003 is a spare server a test adds.
SERVERS = 4


def pytest_report_header() -> str:
    try:
        chosen = release()
    except SystemExit as unknown:  # an OPENSTACK_RELEASE without pins: one line, exit 4
        pytest.exit(str(unknown), returncode=pytest.ExitCode.USAGE_ERROR)
    return f"OpenStack release: {chosen} (venvs in {venv_root()})"


@pytest.fixture(scope="session")
def real_cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCloud]:
    with running_real_cloud(tmp_path_factory.mktemp("openstack"), nodes=SERVERS) as cloud:
        yield cloud
