"""The conformance tier (`make conformance`, marker `conformance`): one real OpenStack
(Keystone, Neutron, Octavia, Nova from PyPI, on sqlite, loopback) per test session.

Not part of `make test`: it needs the services' venvs, which `conformance/install.py`
builds once per machine. The session's directory (configs, databases, access logs, every
service's log) stays under pytest's temporary directory for the reader of a failure.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conformance.realcloud import RealCloud, running_real_cloud

# node-0000..node-0002 are the cluster's nodes; node-0003 is a spare server a test adds.
SERVERS = 4


@pytest.fixture(scope="session")
def real_cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCloud]:
    with running_real_cloud(tmp_path_factory.mktemp("openstack"), nodes=SERVERS) as cloud:
        yield cloud
