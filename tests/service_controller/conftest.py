"""A service controller harness on the fake cloud (tests/support/services.py)."""

from __future__ import annotations

import pytest

from tests.support.services import Harness, harness


@pytest.fixture
def h() -> Harness:
    return harness()
