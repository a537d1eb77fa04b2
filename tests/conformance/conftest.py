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

from tests.conformance.realcloud import (
    RealCloud,
    per_release,
    release,
    running_real_cloud,
    venv_root,
)

# node-0000..node-0002 are the cluster's nodes; node-0003 is a spare server a test adds.
SERVERS = 4
# pytest-timeout's limit for a test of this tier without its own, seconds. The session's
# OpenStack starts in the setup of whichever test comes first (about 35 s on 2026.2, 70-100
# s on 2024.1 on the loaded machine), and the older services answer more slowly: with
# pyproject's 120 s the first test and the 1,500-server list failed on 2024.1.
# With the TLS listeners and RegionTLS the stack's start grew (35 s quiet, over 120 s at load
# 8 on the 2 cores, where every test of a 2026.2 session errored at 120 s): 300 s on 2026.2.
TEST_TIMEOUT = {"2026.2": 300, "2025.1": 600, "2024.1": 600}


def pytest_report_header() -> str:
    try:
        chosen = release()
    except SystemExit as unknown:  # an OPENSTACK_RELEASE without pins: one line, exit 4
        pytest.exit(str(unknown), returncode=pytest.ExitCode.USAGE_ERROR)
    return f"OpenStack release: {chosen} (venvs in {venv_root()})"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    limit = per_release(TEST_TIMEOUT)
    for item in items:
        if item.get_closest_marker("conformance") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(limit))


@pytest.fixture(scope="session")
def real_cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCloud]:
    with running_real_cloud(tmp_path_factory.mktemp("openstack"), nodes=SERVERS) as cloud:
        yield cloud
