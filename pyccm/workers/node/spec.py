"""The cloud-node controller to the worker process (runtime/spec.py): its flags, its build."""

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
    non_negative_int,
    positive_int,
    require,
)

NAME = "cloud-node"


def add_flags(flags: Flags) -> None:
    flags.add_argument(
        "--concurrent-node-syncs",
        type=positive_int,
        default=1,
        help="nodes initialized or updated at once (default %(default)s)",
    )
    flags.add_argument(
        "--concurrent-node-status-updates",
        type=non_negative_int,
        default=0,
        help="nodes whose addresses are refreshed at once, on threads of their own; "
        "0: as many as --concurrent-node-syncs (default %(default)s)",
    )
    flags.add_argument(
        "--node-status-update-frequency", type=duration_flag, default=300.0, help=DURATION
    )


def prepare(args: argparse.Namespace) -> Plan:
    def build(parts: Parts) -> tuple[Controller, int]:
        from pyccm.workers.node.controller import NodeController, NodeSettings

        instances = require(parts.cloud.instances(), cloud=parts.cloud, what="instances")
        settings = NodeSettings(
            workers=args.concurrent_node_syncs,
            status_update_frequency=args.node_status_update_frequency,
            # Upstream: 0 (unset) falls back to --concurrent-node-syncs.
            status_workers=args.concurrent_node_status_updates or args.concurrent_node_syncs,
        )
        controller = NodeController(replica=parts.replica, instances=instances, settings=settings)
        return controller, settings.workers

    return Plan(build=build, worker=NAME)


SPEC = ControllerSpec(name=NAME, add_flags=add_flags, prepare=prepare)
