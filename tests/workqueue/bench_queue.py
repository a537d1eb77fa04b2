"""Throughput of the work queue (not a test: pytest does not collect it; timings belong in
benchmarks, docs/architecture.md#style-timings-in-bench). Run: `.venv/bin/python -m
tests.workqueue.bench_queue [runs]`. It prints
the median of several runs as a markdown table; the lead may move it under bench/.

Scenarios: one thread doing add/get/done; four sync threads with an empty sync fed by one adder;
add_after with distinct delays, then draining once all are due.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from collections.abc import Callable, Hashable

from prometheus_client import CollectorRegistry

from pyccm.workers.runtime.clock import FakeClock
from pyccm.workers.runtime.queue import WorkQueue
from pyccm.workers.runtime.ratelimit import default_controller_rate_limiter

N = 50_000


def make_queue(clock: FakeClock | None = None) -> WorkQueue[Hashable]:
    if clock is None:
        return WorkQueue[Hashable](
            name="bench",
            controller="bench",
            rate_limiter=default_controller_rate_limiter(),
            registry=CollectorRegistry(),
        )
    return WorkQueue[Hashable](
        name="bench",
        controller="bench",
        rate_limiter=default_controller_rate_limiter(clock=clock),
        clock=clock,
        registry=CollectorRegistry(),
    )


def single_thread() -> float:
    queue = make_queue()
    start = time.perf_counter()
    for i in range(N):
        queue.add(i)
        key = queue.get()
        assert key is not None
        queue.done(key)
    return N / (time.perf_counter() - start)


def four_sync_threads() -> float:
    queue = make_queue()
    handled = threading.Semaphore(0)

    def sync_thread() -> None:
        while (key := queue.get()) is not None:
            queue.done(key)
            handled.release()

    threads = [threading.Thread(target=sync_thread) for _ in range(4)]
    for thread in threads:
        thread.start()
    start = time.perf_counter()
    for i in range(N):
        queue.add(i)
    for _ in range(N):
        handled.acquire()
    elapsed = time.perf_counter() - start
    queue.shutdown()
    for thread in threads:
        thread.join()
    return N / elapsed


def delayed() -> float:
    clock = FakeClock()
    queue = make_queue(clock)
    start = time.perf_counter()
    for i in range(N):
        queue.add_after(i, 1.0 + (i % 997) / 10.0)
    clock.advance(1000.0)
    for _ in range(N):
        key = queue.get(timeout=0)
        assert key is not None
        queue.done(key)
    return N / (time.perf_counter() - start)


SCENARIOS: dict[str, Callable[[], float]] = {
    "add+get+done, 1 thread": single_thread,
    "add, 4 sync threads get+done": four_sync_threads,
    "add_after, then get+done when due": delayed,
}


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    print(f"| scenario ({N} keys, median of {runs} runs) | keys/s |")
    print("| --- | ---: |")
    for label, scenario in SCENARIOS.items():
        rates = [scenario() for _ in range(runs)]
        print(f"| {label} | {statistics.median(rates):,.0f} |")


if __name__ == "__main__":
    main()
