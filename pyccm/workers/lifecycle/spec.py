"""The cloud-node-lifecycle controller to the worker process (runtime/spec.py)."""

from __future__ import annotations

import argparse

from pyccm.flags.durations import duration_flag
from pyccm.workers.runtime.controller import Controller
from pyccm.workers.runtime.spec import (
    DURATION,
    ControllerSpec,
    Flags,
    Parts,
    Plan,
    positive_int,
    require,
)

NAME = "cloud-node-lifecycle"


def add_flags(flags: Flags) -> None:
    flags.add_argument("--node-monitor-period", type=duration_flag, default=5.0, help=DURATION)
    flags.add_argument(
        "--concurrent-node-probes",
        type=positive_int,
        default=20,
        help="lifecycle probes in flight (default %(default)s)",
    )


def prepare(args: argparse.Namespace) -> Plan:
    def build(parts: Parts) -> tuple[Controller, int]:
        from pyccm.workers.lifecycle.controller import LifecycleController, LifecycleSettings

        instances = require(parts.cloud.instances(), cloud=parts.cloud, what="instances")
        settings = LifecycleSettings(
            monitor_period=args.node_monitor_period, workers=args.concurrent_node_probes
        )
        controller = LifecycleController(
            replica=parts.replica, instances=instances, settings=settings
        )
        return controller, settings.workers

    return Plan(build=build, worker=NAME)


SPEC = ControllerSpec(name=NAME, add_flags=add_flags, prepare=prepare)
