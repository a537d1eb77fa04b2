"""`pyccm worker NAME`: one controller process, on the bus or `--standalone`."""

from __future__ import annotations

import argparse

from pyccm.flags.addresses import add_bus_flags
from pyccm.flags.durations import duration_flag
from pyccm.logs import add_log_format_flag
from pyccm.protocol.controllers import WORKER_ALIASES
from pyccm.workers.registry import SPECS
from pyccm.workers.runtime.identity import add_cloud_flags, add_cluster_id_flag


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "worker",
        help="one controller process (node, lifecycle, service, route)",
        description="Run one controller. It receives Nodes/Services from the manager over the "
        "bus and sends back what to write; --standalone runs it alone with its own watch.",
    )
    names = sorted({*SPECS, *WORKER_ALIASES})
    parser.add_argument(
        "controller", choices=names, metavar="NAME", help=f"one of {', '.join(names)}"
    )
    add_cloud_flags(parser)
    add_cluster_id_flag(parser)
    parser.add_argument(
        "--cloud-config-reload-period",
        type=duration_flag,
        default=10.0,
        help="re-read --cloud-config (and its clouds.yaml) this often and apply what changed, "
        "no restart needed (default 10s; 0: only on SIGHUP)",
    )
    parser.add_argument(
        "--cloud-api-qps",
        type=float,
        default=20.0,
        help="cloud API calls per second this process may make (default %(default)s)",
    )
    parser.add_argument(
        "--cloud-api-burst",
        type=int,
        default=40,
        help="cloud API calls allowed at once above --cloud-api-qps (default %(default)s)",
    )
    for spec in SPECS.values():
        spec.add_flags(parser.add_argument_group(spec.name))
    parser.add_argument(
        "--standalone", action="store_true", help="no manager: watch and write directly"
    )
    parser.add_argument("--kubeconfig", default="", help="with --standalone (default: in-cluster)")
    add_bus_flags(parser)
    add_log_format_flag(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pyccm.workers.app import main

    return main(args)
