"""The queue reports upstream's workqueue metrics, labelled with the queue's name and its
controller, and they work in prometheus_client's multiprocess mode."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Hashable
from pathlib import Path

from prometheus_client import CollectorRegistry

from pyccm.workers.runtime.clock import FakeClock
from pyccm.workers.runtime.queue import WorkQueue
from pyccm.workers.runtime.ratelimit import service_controller_rate_limiter
from tests.support.workqueue import sample


def test_depth_counts_keys_waiting_including_dirty_keys_in_flight(
    queue: WorkQueue[str], registry: CollectorRegistry
) -> None:
    queue.add("a")
    queue.add("b")
    queue.add("a")
    assert sample(registry, "workqueue_depth") == 2
    assert queue.get(timeout=0) == "a"
    assert sample(registry, "workqueue_depth") == 1
    queue.add("a")  # dirty while in flight: waiting to run again, as upstream counts it
    assert sample(registry, "workqueue_depth") == 2
    assert sample(registry, "workqueue_adds_total") == 3


def test_queue_and_work_durations_are_measured_on_the_queues_clock(
    queue: WorkQueue[str], registry: CollectorRegistry, clock: FakeClock
) -> None:
    queue.add("a")
    clock.advance(2.0)
    assert queue.get(timeout=0) == "a"
    clock.advance(3.0)
    queue.done("a")
    assert sample(registry, "workqueue_queue_duration_seconds_count") == 1
    assert sample(registry, "workqueue_queue_duration_seconds_sum") == 2.0
    assert sample(registry, "workqueue_work_duration_seconds_sum") == 3.0
    assert sample(registry, "workqueue_work_duration_seconds_bucket", le="10.0") == 1
    assert sample(registry, "workqueue_work_duration_seconds_bucket", le="1.0") == 0


def test_a_delayed_keys_queue_time_counts_from_when_it_was_due(
    queue: WorkQueue[str], registry: CollectorRegistry, clock: FakeClock
) -> None:
    queue.add_after("a", 5.0)
    clock.advance(7.0)
    assert queue.get(timeout=0) == "a"
    assert sample(registry, "workqueue_queue_duration_seconds_sum") == 2.0


def test_in_flight_gauges_show_a_sync_that_hangs(
    queue: WorkQueue[str], registry: CollectorRegistry, clock: FakeClock
) -> None:
    queue.add("a")
    queue.add("b")
    assert queue.get(timeout=0) == "a"
    clock.advance(10.0)
    assert queue.get(timeout=0) == "b"
    clock.advance(5.0)
    queue.refresh_metrics()
    assert sample(registry, "workqueue_unfinished_work_seconds") == 15.0 + 5.0
    assert sample(registry, "workqueue_longest_running_processor_seconds") == 15.0
    queue.done("a")
    queue.done("b")
    assert sample(registry, "workqueue_unfinished_work_seconds") == 0.0
    assert sample(registry, "workqueue_longest_running_processor_seconds") == 0.0


def test_refresh_counts_delayed_keys_that_came_due_in_the_depth(
    queue: WorkQueue[str], registry: CollectorRegistry, clock: FakeClock
) -> None:
    queue.add_after("a", 5.0)
    assert sample(registry, "workqueue_depth") == 0
    clock.advance(5.0)
    queue.refresh_metrics()
    assert sample(registry, "workqueue_depth") == 1
    assert sample(registry, "workqueue_adds_total") == 1


def test_every_add_after_counts_a_retry(queue: WorkQueue[str], registry: CollectorRegistry) -> None:
    queue.add("a")
    queue.add_rate_limited("b")
    queue.add_after("c", 30.0)
    queue.add_after("d", 0.0)
    assert sample(registry, "workqueue_retries_total") == 3


def test_queues_sharing_a_registry_keep_their_own_series(
    registry: CollectorRegistry, clock: FakeClock
) -> None:
    def make(name: str) -> WorkQueue[Hashable]:
        return WorkQueue[Hashable](
            name=name,
            controller="service-lb-controller",
            rate_limiter=service_controller_rate_limiter(),
            clock=clock,
            registry=registry,
        )

    services, nodes = make("service"), make("node")
    services.add("shop/web")
    nodes.add("n1")
    nodes.add("n2")

    def depth(name: str) -> float | None:
        labels = {"name": name, "controller": "service-lb-controller"}
        return registry.get_sample_value("workqueue_depth", labels)

    assert (depth("service"), depth("node")) == (1.0, 2.0)


REPO_ROOT = Path(__file__).resolve().parents[2]

MULTIPROCESS_CHILD = textwrap.dedent(
    """
    from collections.abc import Hashable
    from prometheus_client import CollectorRegistry
    from pyccm.workers.runtime.queue import WorkQueue
    from pyccm.workers.runtime.ratelimit import default_controller_rate_limiter

    queue = WorkQueue[Hashable](
        name="Nodes",
        controller="cloud-node-controller",
        rate_limiter=default_controller_rate_limiter(),
        registry=CollectorRegistry(),
    )
    for key in ("n1", "n2", "n3"):
        queue.add(key)
    queue.get()
    import os
    print(os.getpid())
    """
)


def test_metrics_are_collected_across_processes_in_multiprocess_mode(tmp_path: Path) -> None:
    from prometheus_client import multiprocess

    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    pids = [
        int(
            subprocess.run(
                [sys.executable, "-c", MULTIPROCESS_CHILD],
                env=env,
                cwd=REPO_ROOT,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
        for _ in range(2)
    ]
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(tmp_path))  # type: ignore[no-untyped-call]
    labels = {"name": "Nodes", "controller": "cloud-node-controller"}
    assert registry.get_sample_value("workqueue_adds_total", labels) == 6
    assert registry.get_sample_value("workqueue_queue_duration_seconds_count", labels) == 2
    # `livesum`: the depths of both processes add up, until a process is marked dead.
    assert registry.get_sample_value("workqueue_depth", labels) == 4
    multiprocess.mark_process_dead(pids[0], path=str(tmp_path))  # type: ignore[no-untyped-call]
    assert registry.get_sample_value("workqueue_depth", labels) == 2
