"""`pyccm sim {kube,openstack}`: each simulator registers its own sub-command."""

from __future__ import annotations

import argparse

from pyccm.sim.kube import cli as kube_cli
from pyccm.sim.openstack import cli as openstack_cli


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "sim",
        help="run a simulator (Kubernetes API or OpenStack) on loopback",
        description="Run one of the simulators the demo, tests and benchmarks use.",
    )
    simulators = parser.add_subparsers(
        dest="simulator", metavar="SIMULATOR", required=True, help="which simulator to run"
    )
    kube_cli.register(simulators)
    openstack_cli.register(simulators)
