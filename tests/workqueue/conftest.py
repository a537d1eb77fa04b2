"""A queue on a fake clock and a throw-away metrics registry."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

import pytest
from prometheus_client import CollectorRegistry

from pyccm.workers.runtime.clock import FakeClock
from pyccm.workers.runtime.queue import WorkQueue
from pyccm.workers.runtime.ratelimit import ItemExponentialRateLimiter
from tests.support.workqueue import CONTROLLER, NAME

T = TypeVar("T")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def queue(clock: FakeClock, registry: CollectorRegistry) -> WorkQueue[str]:
    """The service controller's queue: per-key backoff 5 s doubling to 300 s."""
    return WorkQueue[str](
        name=NAME,
        controller=CONTROLLER,
        rate_limiter=ItemExponentialRateLimiter[Hashable](base=5.0, cap=300.0),
        clock=clock,
        registry=registry,
    )
