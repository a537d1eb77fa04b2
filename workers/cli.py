"""`pyccm worker NAME`: one controller process, on the bus or `--standalone`."""

from __future__ import annotations

import argparse

from protocol.addresses import add_bus_flags
from protocol.controllers import CONTROLLERS, WORKER_ALIASES


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "worker",
        help="one controller process (node, lifecycle, service, route)",
        description="Run one controller. It receives Nodes/Services from the manager over the "
        "bus and sends back what to write; --standalone runs it alone with its own watch.",
    )
    names = sorted({*CONTROLLERS, *WORKER_ALIASES})
    parser.add_argument(
        "controller", choices=names, metavar="NAME", help=f"one of {', '.join(names)}"
    )
    parser.add_argument(
        "--cloud-provider", default="openstack", help="provider name (default %(default)s)"
    )
    parser.add_argument(
        "--cloud-config", default="", help="provider configuration file (cloud.conf)"
    )
    parser.add_argument("--cluster-name", default="kubernetes")
    parser.add_argument("--cloud-api-qps", type=float, default=20.0)
    parser.add_argument("--cloud-api-burst", type=int, default=40)
    parser.add_argument("--concurrent-node-syncs", type=int, default=1)
    parser.add_argument("--node-status-update-frequency", type=float, default=300.0, help="seconds")
    parser.add_argument("--node-monitor-period", type=float, default=5.0, help="seconds")
    parser.add_argument(
        "--concurrent-node-probes", type=int, default=20, help="lifecycle probes in flight"
    )
    parser.add_argument(
        "--standalone", action="store_true", help="no manager: watch and write directly"
    )
    parser.add_argument("--kubeconfig", default="", help="with --standalone (default: in-cluster)")
    add_bus_flags(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from workers.app import main

    return main(args)
