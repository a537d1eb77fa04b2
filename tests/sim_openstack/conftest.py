"""One simulator per test session (tests/support/openstack.py, OpenStackSims), returned to
its seeded state before every test.

The seeded cloud: nodes 0..5 of `sim.scenario`; node 1 is SHUTOFF, node 2 has no server
(deleted VM), node 3 has a floating IP; zones alternate az-1/az-2.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.openstack import OpenStackSims

SEED: dict[str, Any] = {
    "seed_nodes": 6,
    "shutoff": {1},
    "deleted": {2},
    "floating_ips": {3},
    "zones": ("az-1", "az-2"),
}
DUAL_SEED: dict[str, Any] = {"seed_nodes": 2, "provisioning_delay_s": 0.0, "dual_stack": True}


@pytest.fixture(scope="session")
def session_sim(openstack_sims: OpenStackSims) -> OpenStackSimHandle:
    return openstack_sims.get(SEED)


@pytest.fixture
def sim(session_sim: OpenStackSimHandle) -> OpenStackSimHandle:
    # Tiny delay: PENDING_* is observable but tests never wait long for ACTIVE.
    session_sim.reset()
    session_sim.set_knobs(provisioning_delay_s=0.02)
    return session_sim


@pytest.fixture(scope="session")
def session_conn(session_sim: OpenStackSimHandle) -> Any:
    return session_sim.connection()


@pytest.fixture
def conn(sim: OpenStackSimHandle, session_conn: Any) -> Any:
    return session_conn


@pytest.fixture(scope="session")
def session_dual_sim(openstack_sims: OpenStackSims) -> OpenStackSimHandle:
    """A second simulator whose tenant network is dual-stack (an IPv6 subnet, and an IPv6
    fixed IP on every node port), for the modules that need one."""
    return openstack_sims.get(DUAL_SEED)


@pytest.fixture
def dual(session_dual_sim: OpenStackSimHandle) -> OpenStackSimHandle:
    session_dual_sim.reset()
    session_dual_sim.set_knobs(provisioning_delay_s=0.0)
    return session_dual_sim


@pytest.fixture
def dual_conn(dual: OpenStackSimHandle) -> Iterator[Any]:
    connection = dual.connection()
    yield connection
    connection.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """openstacksdk 4.x itself emits PendingDeprecationWarnings on ordinary calls (an unused
    `service_type` argument, InfluxDB metrics config); pyproject only filters its
    DeprecationWarnings, so these tests ignore the pending ones too."""
    for item in items:
        if "sim_openstack" in str(item.path):
            item.add_marker(
                pytest.mark.filterwarnings("ignore::PendingDeprecationWarning:openstack")
            )
