"""One log format for every long-running process: the manager, each worker, both simulators.

A platform team ships the tree's stdout to a log pipeline, so every line carries the same
fields whichever process wrote it and whichever format was chosen:

    time       RFC 3339, UTC, milliseconds     2025-11-25T11:47:00.123Z
    level      Python's level name             INFO, WARNING, ERROR
    process    which process of the tree       manager, service-1, sim-kube
    logger     the logger's dotted name        pyccm.manager.app
    msg        the message, arguments applied
    traceback  only when an exception was logged (and a stack when one was asked for)

`--log-format text` (the default) prints them on one line as
`TIME PROCESS LEVEL LOGGER: MSG`, the traceback on the lines below, as the tree always
did; `--log-format json` prints one JSON object per line, the traceback as one string
field, so a multi-line traceback never splits a record. `PYCCM_LOG_FORMAT` sets the
default for every process that inherits it: supervisord passes its environment to the
whole tree.

The module imports the standard library only: the manager, the workers and the simulators
all use it, and the simulators import no product code (.importlinter), so it sits at the
top of the `pyccm` package, below nothing, rather than in `protocol/` (the bus's
vocabulary, which the simulators may not import).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
from datetime import UTC, datetime
from types import TracebackType
from typing import TextIO

FORMATS = ("text", "json")
ENV = "PYCCM_LOG_FORMAT"
# The default when neither the flag nor the environment says: what the tree always printed.
DEFAULT_FORMAT = "text"


def rfc3339(timestamp: float) -> str:
    """`2025-11-25T11:47:00.123Z`: UTC, millisecond precision, as Kubernetes prints times."""
    moment = datetime.fromtimestamp(timestamp, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(text: str) -> float:
    """The POSIX timestamp of a `time` field (the inverse of `rfc3339`)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def fields(
    record: logging.LogRecord, *, process: str, formatter: logging.Formatter
) -> dict[str, str]:
    """The record as the fields both formats print, in their order."""
    out = {
        "time": rfc3339(record.created),
        "level": record.levelname,
        "process": process,
        "logger": record.name,
        "msg": record.getMessage(),
    }
    trace = []
    if record.exc_info:
        trace.append(formatter.formatException(record.exc_info))
    if record.stack_info:
        trace.append(formatter.formatStack(record.stack_info))
    if trace:
        out["traceback"] = "\n".join(trace)
    return out


class TextFormatter(logging.Formatter):
    """`TIME PROCESS LEVEL LOGGER: MSG`, then the traceback's lines, if any."""

    def __init__(self, process: str) -> None:
        super().__init__()
        self._process = process

    def format(self, record: logging.LogRecord) -> str:
        got = fields(record, process=self._process, formatter=self)
        line = f"{got['time']} {got['process']} {got['level']} {got['logger']}: {got['msg']}"
        if "traceback" in got:
            line += "\n" + got["traceback"]
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (newlines inside fields are escaped)."""

    def __init__(self, process: str) -> None:
        super().__init__()
        self._process = process

    def format(self, record: logging.LogRecord) -> str:
        got = fields(record, process=self._process, formatter=self)
        return json.dumps(got, ensure_ascii=False, default=str)


def formatter(log_format: str, *, process: str) -> logging.Formatter:
    if log_format == "json":
        return JsonFormatter(process)
    if log_format == "text":
        return TextFormatter(process)
    raise ValueError(f"unknown log format {log_format!r} (one of {', '.join(FORMATS)})")


def configure(
    *, process: str, log_format: str, level: int = logging.INFO, stream: TextIO | None = None
) -> None:
    """Send every log record of this process to `stream` (stderr) in `log_format`.

    Replaces whatever handlers the root logger had, so a library that configured logging
    at import cannot add a second, differently formatted copy of each line. Python
    warnings become log records too (logger `py.warnings`), so they follow the format.
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter(log_format, process=process))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(True)
    # An exception nothing caught (in the main thread or another) is a record with its
    # traceback too, rather than raw lines on stderr that a JSON reader cannot parse.
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_uncaught_in_thread


def _log_uncaught(
    kind: type[BaseException], error: BaseException, trace: TracebackType | None
) -> None:
    logging.getLogger("pyccm.uncaught").critical(
        "uncaught exception: %s", error, exc_info=(kind, error, trace)
    )


def _log_uncaught_in_thread(hook: threading.ExceptHookArgs) -> None:
    if hook.exc_type is SystemExit:
        return  # threading's own default stays silent on SystemExit too
    thread = hook.thread.name if hook.thread is not None else "?"
    error = hook.exc_value
    logging.getLogger("pyccm.uncaught").critical(
        "uncaught exception in thread %s: %s",
        thread,
        hook.exc_type.__name__ if error is None else error,
        exc_info=None if error is None else (hook.exc_type, error, hook.exc_traceback),
    )


def log_format_type(text: str) -> str:
    """argparse type for --log-format, which also checks a default taken from the
    environment (argparse checks `choices` for given values only)."""
    if text not in FORMATS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a log format (one of {', '.join(FORMATS)}; "
            f"the default comes from {ENV} when it is set)"
        )
    return text


def add_log_format_flag(parser: argparse.ArgumentParser) -> None:
    """`--log-format json|text`, defaulting to $PYCCM_LOG_FORMAT, else text."""
    parser.add_argument(
        "--log-format",
        type=log_format_type,
        default=os.environ.get(ENV) or DEFAULT_FORMAT,
        metavar="{text,json}",
        help="log lines as text or as one JSON object per line, with the same fields "
        f"(default: ${ENV}, else {DEFAULT_FORMAT})",
    )
