"""Initialization syncs driven as the worker's runner drives them: a sync whose answer a
batch is still fetching returns nothing, and the batch queues the node again when its
answer lands (the controller's `enqueue`, given by `periodics`)."""

from __future__ import annotations

import queue
import threading
import time

from pyccm.protocol.messages import Action
from pyccm.workers.node.controller import NodeController
from pyccm.workers.runtime.controller import SyncFailed

Result = tuple[Action, ...] | SyncFailed


def sync_until_answered(
    controller: NodeController, names: list[str], *, threads: int = 1, timeout: float = 30.0
) -> dict[str, Result]:
    """Each name synced until its sync does something (actions, or a failure), from
    `threads` threads, and every key queued meanwhile synced too; a name already queued is
    not queued twice (the workqueue's rule). The first result of each name is kept."""
    keys: queue.Queue[str] = queue.Queue()
    queued: set[str] = set()
    results: dict[str, Result] = {}
    lock = threading.Lock()

    def enqueue(name: str) -> None:
        with lock:
            if name in queued:
                return
            queued.add(name)
        keys.put(name)

    controller.periodics(enqueue)
    for name in names:
        enqueue(name)
    deadline = time.monotonic() + timeout

    def work() -> None:
        while time.monotonic() < deadline:
            with lock:
                if len(results) == len(names) and keys.empty():
                    return
            try:
                name = keys.get(timeout=0.05)
            except queue.Empty:
                continue
            with lock:
                queued.discard(name)
            try:
                result: Result = controller.sync(name)
            except SyncFailed as failed:
                result = failed
            if result != ():
                with lock:
                    results.setdefault(name, result)

    workers = [threading.Thread(target=work, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert sorted(results) == sorted(names), f"no answer for {set(names) - set(results)}"
    return results
