"""The `pyccm` command line: one entry point, one sub-command per process kind.

Each part of the tree registers its own sub-command from a light module (argparse only),
and imports its heavy dependencies (aiohttp, openstacksdk, kubernetes, zmq) inside the
command's run function, so `pyccm --help` answers at once.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from pyccm import __version__, demo
from pyccm.manager import cli as manager_cli
from pyccm.sim import cli as sim_cli
from pyccm.workers import cli as worker_cli

DESCRIPTION = """\
pyccm is a Kubernetes cloud-controller-manager for OpenStack. A manager process holds
the leader Lease and the only watch on the API server, and fans changes out over ZeroMQ
to one process per controller (node, lifecycle, service, route), which call OpenStack
and send typed results back for the manager to apply.

Start here:
  pyccm demo                       the whole tree against both simulators, end to end
  pyccm sim kube --seed-nodes 5    a Kubernetes API simulator with a seeded cluster
  pyccm sim openstack              an OpenStack (Keystone/Nova/Neutron/Octavia) simulator
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pyccm",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"pyccm {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    demo.register(commands)
    manager_cli.register(commands)
    worker_cli.register(commands)
    sim_cli.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # Every process of the tree writes its metrics here (the manager serves them all);
    # prometheus_client needs the directory to exist before the first metric is made.
    if directory := os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.makedirs(directory, mode=0o700, exist_ok=True)
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
