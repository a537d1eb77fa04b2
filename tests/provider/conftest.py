"""The provider tests' OpenStack simulator: four nodes (tests/support/openstack.py), one
per session, reset before each test; `make_cloud` builds the provider on it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.openstack import SMALL_SEED


@pytest.fixture
def openstack_seed() -> dict[str, Any]:
    return SMALL_SEED
