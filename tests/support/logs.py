"""`pyccm` child processes, their log lines read back in either format, and the manager's
HTTP endpoints as a scraper or a probe reads them (tests/operations)."""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from pyccm import lifetime
from pyccm.logs import parse_time

FIELDS = ("time", "level", "process", "logger", "msg")
# RFC 3339 in UTC with milliseconds, as pyccm.logs writes it.
RFC3339_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# `TIME PROCESS LEVEL LOGGER: MSG`; the lines below one that does not match are its traceback.
TEXT_LINE = re.compile(
    r"^(?P<time>\S+) (?P<process>\S+) (?P<level>[A-Z]+) (?P<logger>[\w.]+): (?P<msg>.*)$"
)


@contextmanager
def pyccm(
    *args: str, log: Path, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """`python -m pyccm ARGS` with stdout and stderr in `log`; SIGTERM (then SIGKILL) at exit."""
    with log.open("ab") as out:
        process = lifetime.spawn(
            [sys.executable, "-m", "pyccm", *args], stdout=out, stderr=out, env=env
        )
    try:
        yield process
    finally:
        lifetime.stop(process, timeout=15)


def json_records(output: str) -> list[dict[str, Any]]:
    """Every line is one JSON object (the assertion names the first line that is not)."""
    records = []
    for number, line in enumerate(output.splitlines(), 1):
        try:
            record = json.loads(line)
        except ValueError:
            raise AssertionError(f"line {number} is not JSON: {line!r}") from None
        assert isinstance(record, dict), f"line {number} is not a JSON object: {line!r}"
        records.append(record)
    return records


def text_records(output: str) -> list[dict[str, Any]]:
    """Records of the text format: a matching line starts one, the others are its traceback."""
    records: list[dict[str, Any]] = []
    for number, line in enumerate(output.splitlines(), 1):
        match = TEXT_LINE.match(line)
        if match and RFC3339_UTC.match(match["time"]):
            records.append(match.groupdict())
        elif records:
            previous = records[-1]
            previous["traceback"] = "\n".join(filter(None, [previous.get("traceback"), line]))
        else:
            raise AssertionError(f"line {number} starts no record: {line!r}")
    return records


def check_fields(record: Mapping[str, Any], *, process: str) -> None:
    """The fields every record carries, whatever the format, and nothing else."""
    assert set(FIELDS) <= set(record) <= {*FIELDS, "traceback"}, record
    assert RFC3339_UTC.match(record["time"]), record
    assert parse_time(record["time"]) > 0
    assert record["level"] in LEVELS, record
    assert record["process"] == process, record
    assert record["logger"], record


def admin_token(kubeconfig: Path) -> str:
    """The bearer token of the kubeconfig's first user (the kube simulator's admin)."""
    config = yaml.safe_load(kubeconfig.read_text())
    return str(config["users"][0]["user"]["token"])


def manager_get(
    port: int, path: str, *, token: str = "", timeout: float = 5.0
) -> tuple[int, bytes]:
    """(status, body) of GET `path` on the manager's --secure-port, as a scraper or a
    probe gets it. The one place the tests talk to that port: HTTPS with
    the bearer token when the manager serves TLS (its certificate is self-signed), plain
    HTTP otherwise. Connection errors raise (OSError); a probe waits on them."""
    unverified = ssl.create_default_context()
    unverified.check_hostname = False
    unverified.verify_mode = ssl.CERT_NONE
    try:
        return _get(f"https://127.0.0.1:{port}{path}", token, unverified, timeout)
    except urllib.error.URLError as error:
        if not isinstance(error.reason, ssl.SSLError):
            raise
    # The port answered, but not with TLS: the manager serves plain HTTP.
    return _get(f"http://127.0.0.1:{port}{path}", "", None, timeout)


def _get(url: str, token: str, context: ssl.SSLContext | None, timeout: float) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
