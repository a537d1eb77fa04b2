"""The service controller's queue as the workqueue tests build it: its names and a metric
read back (tests/workqueue)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

NAME = "service"
CONTROLLER = "service-lb-controller"


def sample(registry: CollectorRegistry, metric: str, **labels: str) -> float:
    """A metric's value for the test queue (0 when it has not been written yet)."""
    value = registry.get_sample_value(metric, {"name": NAME, "controller": CONTROLLER, **labels})
    return 0.0 if value is None else value
