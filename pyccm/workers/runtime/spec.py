"""What the worker process knows of a controller: what the controller's spec tells it.

`pyccm worker NAME` looks NAME up in `pyccm.workers.registry` and branches on no name:
each controller's spec adds its flags to the command line, checks them before the worker
talks to anyone (`prepare`: a bad flag is a `ConfigError`, one line and exit 2, never a
wait for the manager), says whether the cloud must know the cluster id, and builds the
controller from the cloud capability it uses. Spec modules stay light (argparse and the
flag parsers): `pyccm --help` builds every worker flag, so a spec imports its
controller's module only when it builds it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from pyccm.flags.load_balancer_class import UNCLASSED, LoadBalancerClasses
from pyccm.provider.interface import Cloud
from pyccm.workers.runtime.commit import Committer
from pyccm.workers.runtime.controller import Controller, Disabled
from pyccm.workers.runtime.replica import Replica

T = TypeVar("T")

Flags = argparse._ActionsContainer
DURATION = "seconds, or a duration such as 5s or 5m"


@dataclass(frozen=True)
class Parts:
    """What a controller is built from: the cloud, the replica its syncs read, and the
    committer its syncs write through when a write must land before they go on."""

    cloud: Cloud
    replica: Replica
    commit: Committer


# The controller and its number of sync threads; `Disabled` for one that cannot run here
# (upstream skips such a controller at start and runs the others).
Build = Callable[[Parts], tuple[Controller, int]]


@dataclass(frozen=True)
class Plan:
    """A controller's flags, checked; nothing is built or asked yet."""

    build: Build
    # Its name on the bus, in its log lines and metrics (`service-1` for shard 1 of 2).
    worker: str
    # The cloud must know the cluster id before the controller is built: what it creates
    # carries it (load balancers' tags, the router's claim of the cluster CIDRs).
    needs_cluster_id: bool = False
    # The Services' load-balancer classes it claims: a standalone worker projects the
    # Services through them, as the manager does for the bus.
    classes: LoadBalancerClasses = UNCLASSED


@dataclass(frozen=True)
class ControllerSpec:
    # Canonical name (protocol.controllers.CONTROLLERS).
    name: str
    # Its flags, in their own group of `pyccm worker --help`.
    add_flags: Callable[[Flags], None]
    # Its flags checked (ConfigError names a bad one) and what to build from them.
    prepare: Callable[[argparse.Namespace], Plan]


def disabled(reason: str) -> Build:
    """The build of a controller its flags turn off: it says why, and the worker stays up
    doing nothing (docs/operator-guide.md: "disabled, not fatal")."""

    def build(parts: Parts) -> tuple[Controller, int]:
        raise Disabled(reason)

    return build


def require(capability: T | None, *, cloud: Cloud, what: str) -> T:
    """A capability the cloud offers, else `Disabled` naming it."""
    if capability is None:
        raise Disabled(f"cloud provider {cloud.name!r} has no {what} support")
    return capability


def positive_int(value: str) -> int:
    """An argparse type for a count of threads or calls in flight: 0 would run nothing."""
    return _whole_number(value, minimum=1, below="must be at least 1")


def non_negative_int(value: str) -> int:
    """An argparse type for a count where 0 means "the value of another flag"."""
    return _whole_number(value, minimum=0, below="cannot be a negative number")


def _whole_number(value: str, *, minimum: int, below: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number < minimum:
        raise argparse.ArgumentTypeError(f"{value!r}: {below}")
    return number
