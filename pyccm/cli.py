"""The `pyccm` command line: one entry point, one sub-command per process kind.

Each part of the tree registers its own sub-command from its own module, and only the module
of the command that runs is imported (all of them for `pyccm --help`): a worker does not
carry the manager's code (docs/architecture.md#lean-imports). Another installed distribution
may add commands (`pyccm.commands` entry points): the simulators' adds `demo` and `sim`.
Heavy dependencies (zmq, the simulators' aiohttp) are imported inside a command's run function, so
`pyccm --help` answers at once.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, entry_points, version
from typing import Any, NoReturn

from pyccm import __version__, lifetime
from pyccm.provider.registry import BUILTIN_PROVIDERS, ENTRY_POINT_GROUP

DESCRIPTION = """\
pyccm is a Kubernetes cloud-controller-manager for OpenStack. A manager process holds
the leader Lease and the only watch on the API server, and fans changes out over ZeroMQ
to one process per controller (node, lifecycle, service, route), which call OpenStack
and send typed results back for the manager to apply.

Start here:
  pyccm tree --cloud-config FILE   the production tree under supervisord, defaults filled in
With the simulators installed (the pyccm-sim distribution; a checkout's `make setup`):
  pyccm demo                       the whole tree against both simulators, end to end
  pyccm sim kube --seed-nodes 5    a Kubernetes API simulator with a seeded cluster
  pyccm sim openstack              an OpenStack (Keystone/Nova/Neutron/Octavia) simulator
"""


# The distributions whose versions explain a bug report: the cloud client, the HTTP stack
# (the Kubernetes API's and the cloud's), the bus (pyzmq, and libzmq below it), the wire
# format, the metrics and the supervisor.
LIBRARIES = (
    "openstacksdk",
    "keystoneauth1",
    "urllib3",
    "pyzmq",
    "msgspec",
    "prometheus-client",
    "supervisor",
)


def version_report() -> str:
    """`pyccm --version`: pyccm's version, the registered providers and, one per line,
    `NAME VERSION` of Python and of the libraries that matter."""
    registered = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    lines = [f"pyccm {__version__}"]
    lines += [f"provider {name} {target}" for name, target in sorted(registered.items())]
    lines += [
        f"provider {name} {target} (built in; no {ENTRY_POINT_GROUP} entry point)"
        for name, target in sorted(BUILTIN_PROVIDERS.items())
        if name not in registered
    ]
    lines.append(f"python {platform.python_version()} ({platform.python_implementation()})")
    for library in LIBRARIES:
        lines.append(f"{library} {_installed(library)}")
        if library == "pyzmq":
            lines.append(f"libzmq {_libzmq()}")
    return "\n".join(lines)


def _installed(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "not installed"


def _libzmq() -> str:
    try:
        import zmq
    except ImportError:
        return "not installed"
    return str(zmq.zmq_version())


# Each command and the module whose `register` adds it.
COMMANDS: Mapping[str, str] = {
    "manager": "pyccm.manager.cli",
    "worker": "pyccm.workers.cli",
    "keys": "pyccm.keys_command",
    "gc": "pyccm.gc_command",
    "plan": "pyccm.plan_command",
    "tree": "pyccm.tree_command",
}


class VersionAction(argparse.Action):
    """Like argparse's "version" action, but the report is built only when asked for:
    it imports zmq, which `pyccm --help` should not pay for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> NoReturn:
        print(version_report())
        parser.exit()


# Commands another distribution adds: a module with `register`, under its command's name.
# pyccm-sim (sim/) adds `demo` and `sim` this way; the product's image has neither.
COMMAND_ENTRY_POINT_GROUP = "pyccm.commands"


def all_commands() -> dict[str, str]:
    """The product's commands and those other installed distributions add."""
    added = {ep.name: ep.value for ep in entry_points(group=COMMAND_ENTRY_POINT_GROUP)}
    return {**COMMANDS, **{name: module for name, module in added.items() if name not in COMMANDS}}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line; with `only` (a command's name), that command alone is registered
    (and imported); with anything else, every command."""
    parser = argparse.ArgumentParser(
        prog="pyccm",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action=VersionAction,
        help="print the version, the registered cloud providers and the versions of Python "
        "and the libraries that matter, one per line, and exit",
    )
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, help="what to run (one of the below)"
    )
    known = COMMANDS if only in COMMANDS else all_commands()
    if only not in known:
        only = None
    for name, module in known.items():
        if only is None or name == only:
            importlib.import_module(module).register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # A program of `pyccm tree`'s supervisord ends with it, however supervisord ends.
    lifetime.tie_to_starter()
    # Every process of the tree writes its metrics here (the manager serves them all);
    # prometheus_client needs the directory to exist before the first metric is made.
    if directory := os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.makedirs(directory, mode=0o700, exist_ok=True)
    given = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(given[0] if given else None)
    args = parser.parse_args(given)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
