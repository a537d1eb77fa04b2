"""`--log-format json|text` (or `PYCCM_LOG_FORMAT`): every long-running process writes the
same fields in both formats (time in RFC 3339 UTC, level, process, logger, msg, and the
traceback of an exception), JSON as one object per line.

The formatters are checked on records with a traceback; the real processes (a manager
against the kube simulator, a worker, the OpenStack simulator) are run and every line
they write is parsed."""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pyccm.logs import JsonFormatter, TextFormatter, parse_time, rfc3339
from pyccm_sim.kube.testing import KubeSimHandle, running_kube_sim
from tests.support.logs import check_fields, json_records, pyccm, text_records
from tests.support.waiting import wait_for

Parse = Callable[[str], list[dict[str, Any]]]
PARSERS: dict[str, Parse] = {"json": json_records, "text": text_records}
SUPERVISORD_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ ")
STARTUP = 60.0


def record_with_traceback(message: str) -> logging.LogRecord:
    try:
        raise RuntimeError("the cloud said no")
    except RuntimeError:
        return logging.getLogger("pyccm.workers.runner").makeRecord(
            "pyccm.workers.runner",
            logging.ERROR,
            __file__,
            1,
            message,
            ("default/svc",),
            sys.exc_info(),
        )


def test_both_formats_carry_the_same_fields_and_the_traceback() -> None:
    record = record_with_traceback("sync of %s failed")
    as_json = json_records(JsonFormatter("service-1").format(record))
    as_text = text_records(TextFormatter("service-1").format(record))
    assert as_json == as_text
    (only,) = as_json
    check_fields(only, process="service-1")
    assert only["msg"] == "sync of default/svc failed"
    assert only["logger"] == "pyccm.workers.runner"
    assert only["level"] == "ERROR"
    assert only["traceback"].startswith("Traceback (most recent call last):")
    assert only["traceback"].endswith("RuntimeError: the cloud said no")


def test_a_multi_line_message_stays_one_json_line() -> None:
    record = record_with_traceback("first\nsecond %s")
    line = JsonFormatter("manager").format(record)
    assert "\n" not in line
    assert json_records(line)[0]["msg"] == "first\nsecond default/svc"


def test_the_time_is_rfc3339_in_utc_with_milliseconds() -> None:
    assert rfc3339(1_764_071_220.5) == "2025-11-25T11:47:00.500Z"
    assert parse_time("2025-11-25T11:47:00.500Z") == 1_764_071_220.5


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeSimHandle]:
    with running_kube_sim(seed_nodes=2) as handle:
        yield handle


# (flag, environment): the flag, the environment variable supervisord passes down, the default.
WAYS = {
    "json flag": (["--log-format=json"], {}, "json"),
    "json from PYCCM_LOG_FORMAT": ([], {"PYCCM_LOG_FORMAT": "json"}, "json"),
    "text flag over PYCCM_LOG_FORMAT": (
        ["--log-format=text"],
        {"PYCCM_LOG_FORMAT": "json"},
        "text",
    ),
    "text by default": ([], {}, "text"),
}


def environment(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYCCM_LOG_FORMAT"}
    return env | extra


@pytest.mark.e2e
@pytest.mark.parametrize("way", list(WAYS))
def test_a_manager_writes_every_line_with_the_fields(
    way: str, kube: KubeSimHandle, tmp_path: Path
) -> None:
    flags, env, chosen = WAYS[way]
    log = tmp_path / "manager.log"
    arguments = [
        "manager",
        f"--kubeconfig={kube.kubeconfig_path}",
        "--controllers=",
        "--secure-port=0",
        "--leader-elect=false",
        f"--runtime-dir={tmp_path / 'run'}",
        *flags,
    ]
    with pyccm(*arguments, log=log, env=environment(env)) as manager:
        wait_for(
            lambda: "caches synced" in log.read_text(),
            timeout=STARTUP,
            what="the manager logs caches synced",
        )
    assert manager.returncode == 0
    records = PARSERS[chosen](log.read_text())
    for record in records:
        check_fields(record, process="manager")
    messages = [r["msg"] for r in records]
    assert any(m.startswith("caches synced") for m in messages), messages
    synced = next(r for r in records if r["msg"].startswith("caches synced"))
    assert (synced["level"], synced["logger"]) == ("INFO", "pyccm.manager.app")


@pytest.mark.e2e
@pytest.mark.parametrize("log_format", ["json", "text"])
def test_a_worker_writes_its_lines_under_its_name(log_format: str, tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    # No --cluster-cidr: the route worker logs one ERROR line and stays up.
    arguments = ["worker", "route", "--cluster-cidr=", "--cloud-provider=fake"]
    arguments += [f"--runtime-dir={tmp_path / 'run'}", f"--log-format={log_format}"]
    with pyccm(*arguments, log=log, env=environment({})):
        wait_for(
            lambda: "controller is disabled" in log.read_text(),
            timeout=STARTUP,
            what="the route worker says it is disabled",
        )
    records = PARSERS[log_format](log.read_text())
    for record in records:
        check_fields(record, process="route")
    disabled = [r for r in records if "the route controller is disabled" in r["msg"]]
    assert [(r["level"], r["logger"]) for r in disabled] == [("ERROR", "pyccm.workers.app")]


@pytest.mark.e2e
@pytest.mark.parametrize("log_format", ["json", "text"])
def test_the_openstack_simulator_logs_its_requests_in_the_format(
    log_format: str, tmp_path: Path
) -> None:
    log = tmp_path / "openstack.log"
    arguments = ["sim", "openstack", "--verbose", f"--log-format={log_format}"]
    with pyccm(*arguments, log=log, env=environment({})):
        ready = wait_for(
            lambda: next((x for x in log.read_text().splitlines() if "ready at" in x), ""),
            timeout=STARTUP,
            what="the simulator's ready line",
        )
        url = ready.split("ready at ", 1)[1].split()[0]
        with urllib.request.urlopen(f"{url}/identity/v3", timeout=10) as answer:
            assert answer.status == 200
        wait_for(
            lambda: "GET /identity/v3" in log.read_text(),
            timeout=STARTUP,
            what="the request's access line",
        )
    # The ready line is the simulator's announcement on stdout, for its parent to read.
    lines = [x for x in log.read_text().splitlines() if "ready at" not in x]
    records = PARSERS[log_format]("\n".join(lines))
    for record in records:
        check_fields(record, process="sim-openstack")
    assert any("GET /identity/v3" in r["msg"] for r in records)
    assert parse_time(records[-1]["time"]) > 0


@pytest.mark.e2e
def test_the_demo_passes_the_format_to_everything_it_starts(tmp_path: Path) -> None:
    out = tmp_path / "demo.out"
    arguments = ["demo", "--nodes=1", "--services=1", "--keep", "--log-format=json"]
    with pyccm(*arguments, log=out, env=environment({})) as demo:
        wait_for(
            lambda: "still running" in out.read_text(),
            timeout=180,
            what="the demo converges and keeps running",
        )
        kubeconfig = re.search(r"kubeconfig (\S+)", out.read_text())
        assert kubeconfig is not None
        workdir = Path(kubeconfig.group(1)).parent
        tree = (workdir / "tree.log").read_text().splitlines()
        demo.send_signal(signal.SIGINT)
        demo.wait(60)
    shutil.rmtree(workdir, ignore_errors=True)
    # Every line of the tree is JSON, but supervisord's own (`2025-11-25 11:47:00,123 INFO`).
    records = json_records("\n".join(x for x in tree if not SUPERVISORD_LINE.match(x)))
    assert "manager" in {r["process"] for r in records}
    for record in records:
        check_fields(record, process=record["process"])
