"""A route controller harness on the FakeCloud; the OpenStack simulator of the provider
tests (four nodes) for test_against_the_openstack_simulator.py."""

from __future__ import annotations

from typing import Any

import pytest

from pyccm_sim.fake_provider import FakeCloud
from tests.support.openstack import SMALL_SEED
from tests.support.routes import Harness, build


@pytest.fixture
def harness() -> Harness:
    return build(FakeCloud())


@pytest.fixture
def openstack_seed() -> dict[str, Any]:
    return SMALL_SEED
