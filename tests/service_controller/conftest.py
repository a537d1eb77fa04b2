"""A service controller harness on the fake cloud (tests/support/services.py)."""

from __future__ import annotations

import pytest

# make_node and make_service: transitional, while this folder's modules move to
# tests.support.services (issue 21).
from tests.support.services import Harness, harness, make_node, make_service  # noqa: F401


@pytest.fixture
def h() -> Harness:
    return harness()
