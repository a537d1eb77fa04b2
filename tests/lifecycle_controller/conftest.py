"""The provider tests' OpenStack simulator (four nodes), for
test_against_the_openstack_simulator.py (started only when a test asks for it)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.openstack import SMALL_SEED


@pytest.fixture
def openstack_seed() -> dict[str, Any]:
    return SMALL_SEED
