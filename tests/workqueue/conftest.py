"""A queue on a fake clock and a throw-away metrics registry, plus helpers to run a blocking call
in a thread and wait for it without sleeping."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import pytest
from prometheus_client import CollectorRegistry

from pyccm.workers.runtime.clock import FakeClock
from pyccm.workers.runtime.queue import WorkQueue
from pyccm.workers.runtime.ratelimit import ItemExponentialRateLimiter

T = TypeVar("T")

NAME = "service"
CONTROLLER = "service-lb-controller"


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


def sample(registry: CollectorRegistry, metric: str, **labels: str) -> float:
    """A metric's value for the test queue (0 when it has not been written yet)."""
    value = registry.get_sample_value(metric, {"name": NAME, "controller": CONTROLLER, **labels})
    return 0.0 if value is None else value


class Background(Generic[T]):
    """Runs a blocking call in a daemon thread; `result()` joins it with a generous deadline."""

    def __init__(self, call: Callable[[], T]) -> None:
        self._value: list[T] = []
        self._thread = threading.Thread(target=lambda: self._value.append(call()), daemon=True)
        self._thread.start()

    def result(self, timeout: float = 10.0) -> T:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the blocking call did not return"
        return self._value[0]

    @property
    def finished(self) -> bool:
        return not self._thread.is_alive()
