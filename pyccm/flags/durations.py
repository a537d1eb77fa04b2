"""Durations the way upstream writes them (Go's `time.ParseDuration`): `10s`, `5m`, `1m30s`.

Flags of the manager and the workers and the keys of `cloud.conf` accept them, so an
operator's upstream values carry over unchanged; a bare number still means seconds.
"""

from __future__ import annotations

import argparse
import re

_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def parse_duration(text: str) -> float:
    """Go's `time.ParseDuration`, in seconds. Raises ValueError."""
    body = text.strip()
    sign = -1.0 if body.startswith("-") else 1.0
    body = body.lstrip("+-")
    if body == "0":
        return 0.0
    if not body or _DURATION_PART.sub("", body) != "":
        raise ValueError(f"invalid duration {text!r} (a number with a unit: 5s, 1m30s, 500ms)")
    parts = _DURATION_PART.findall(body)
    return sign * sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)


def duration_flag(text: str) -> float:
    """An argparse `type`: seconds as a bare number, or a Go duration."""
    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = parse_duration(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration cannot be negative")
    return seconds
