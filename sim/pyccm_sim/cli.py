"""The simulators' command line: `pyccm sim {kube,openstack}` where pyccm is installed
beside them (a `pyccm.commands` entry point), and `pyccm-sim {kube,openstack}` or
`python -m pyccm_sim {kube,openstack}` on their own. Each simulator registers its own
sub-command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pyccm import lifetime
from pyccm_sim.kube import cli as kube_cli
from pyccm_sim.openstack import cli as openstack_cli

DESCRIPTION = "Run one of the simulators the demo, tests and benchmarks use."


def add_simulators(parser: argparse.ArgumentParser) -> None:
    simulators = parser.add_subparsers(
        dest="simulator", metavar="SIMULATOR", required=True, help="which simulator to run"
    )
    kube_cli.register(simulators)
    openstack_cli.register(simulators)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "sim",
        help="run a simulator (Kubernetes API or OpenStack) on loopback",
        description=DESCRIPTION,
    )
    add_simulators(parser)


def main(argv: Sequence[str] | None = None) -> int:
    """`pyccm-sim`: the same sub-commands as `pyccm sim`."""
    lifetime.tie_to_starter()
    parser = argparse.ArgumentParser(prog="pyccm-sim", description=DESCRIPTION)
    add_simulators(parser)
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
