"""A worker whose manager does not answer says what it waits for, where, every 15 s, and
`pyccm_worker_waiting_for_manager{worker}` is 1 until the manager answers.

Real `pyccm worker` processes on an ipc bus in a temp dir; the manager is the manager's own
bus server (with an empty cache), started once the waiting has been seen. The gauge is read
from the worker's PROMETHEUS_MULTIPROC_DIR, where the tree's manager reads it for /metrics.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pyccm import lifetime
from pyccm.exposition import pod_registry
from pyccm.logs import parse_time
from pyccm.manager.bus import BusServer, BusSettings, WorkerIdentity
from pyccm.manager.store import Cache
from pyccm.protocol.messages import Delta, Result, SessionId

WAITING = "pyccm_worker_waiting_for_manager"


def eventually(condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"condition not reached within {timeout}s"
        time.sleep(0.1)


@contextmanager
def manager(tmp: Path, *, cluster_id: str) -> Iterator[None]:
    """The manager's bus server on the worker's default addresses under `tmp`/run, with
    an empty, synced cache: it answers WhoIs with `cluster_id` and sends empty snapshots."""
    session = SessionId("test-manager")
    holder: list[BusServer] = []

    def publish(channel: str, delta: Delta) -> None:
        holder[0].publish(channel, delta)

    def no_results(identity: WorkerIdentity, result: Result) -> None:
        raise AssertionError(f"a result from a worker with nothing to sync: {result}")

    cache = Cache(session=session, publish=publish)
    cache.nodes.synced.set()
    cache.services.synced.set()
    server = BusServer(
        settings=BusSettings(
            pub_address=f"ipc://{tmp}/run/bus-pub.sock",
            router_address=f"ipc://{tmp}/run/bus-router.sock",
        ),
        session=session,
        cache=cache,
        on_result=no_results,
        cluster_id=lambda: cluster_id,
    )
    holder.append(server)
    server.serve(True)
    server.start()
    try:
        yield
    finally:
        server.stop()


@contextmanager
def worker(tmp: Path, *args: str) -> Iterator[Path]:
    """A `pyccm worker` with JSON logs in the returned file; SIGTERMed at exit."""
    log = tmp / "worker.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYCCM_")}
    env["PROMETHEUS_MULTIPROC_DIR"] = str(tmp / "metrics")
    (tmp / "metrics").mkdir()
    command = [sys.executable, "-m", "pyccm", "worker", *args, "--cloud-provider=fake"]
    command += [f"--runtime-dir={tmp}/run", "--log-format=json"]
    with log.open("wb") as out:
        process = lifetime.spawn(command, stdout=out, stderr=out, env=env)
    try:
        yield log
    finally:
        process.terminate()
        process.wait(15)


def messages(log: Path, containing: str) -> list[dict[str, str]]:
    records = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    return [r for r in records if containing in r["msg"]]


def gauge(tmp: Path, worker: str) -> float | None:
    registry = pod_registry(str(tmp / "metrics"))
    return registry.get_sample_value(WAITING, {"worker": worker})


@pytest.mark.parametrize(
    ("args", "name", "what"),
    [
        (["service"], "service", "to tell the cluster id"),
        (["cloud-node"], "cloud-node", "for a snapshot of node"),
    ],
    ids=["service: the cluster id", "node: its snapshot"],
)
def test_the_wait_is_said_every_15_seconds_and_shown_until_the_manager_answers(
    args: list[str], name: str, what: str, tmp_path: Path
) -> None:
    router = f"ipc://{tmp_path}/run/bus-router.sock"
    line = f"waiting for the manager at {router} {what}: no answer"
    with worker(tmp_path, *args) as log:
        # The first line after a few seconds, then one every 15 s: not one line, never to
        # be repeated, and not one per retry (a retry is every second).
        eventually(lambda: len(messages(log, line)) >= 2, timeout=60)
        first, second = messages(log, line)[:2]
        assert parse_time(second["time"]) - parse_time(first["time"]) >= 10
        assert first["level"] == "WARNING"
        assert gauge(tmp_path, name) == 1

        with manager(tmp_path, cluster_id="c0ffee"):
            eventually(lambda: bool(messages(log, "replica synced from the manager")), 30)
            eventually(lambda: gauge(tmp_path, name) == 0, 10)
            assert messages(log, "the manager answered after")


def test_a_worker_that_gets_its_answer_at_once_never_says_it_waits(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir(mode=0o700)
    with manager(tmp_path, cluster_id="c0ffee"), worker(tmp_path, "service") as log:
        eventually(lambda: bool(messages(log, "replica synced from the manager")), 30)
        # Past the first line's due time (3 s): still nothing said, the gauge at 0.
        time.sleep(4)
        assert not messages(log, "waiting for the manager")
        assert gauge(tmp_path, "service") == 0
