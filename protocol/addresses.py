"""Where the bus lives: the default ipc:// addresses, and the flags both ends share."""

from __future__ import annotations

import argparse
import os

DEFAULT_RUNTIME_DIR = os.environ.get("PYCCM_RUNTIME_DIR", "/run/pyccm")


def bus_addresses(runtime_dir: str) -> tuple[str, str]:
    """The default (PUB, ROUTER) addresses under the runtime directory."""
    return f"ipc://{runtime_dir}/bus-pub.sock", f"ipc://{runtime_dir}/bus-router.sock"


def add_bus_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runtime-dir",
        default=DEFAULT_RUNTIME_DIR,
        help="directory (mode 0700) holding the bus's ipc sockets (default %(default)s)",
    )
    parser.add_argument("--bus-pub", default="", help="PUB address (default: under --runtime-dir)")
    parser.add_argument(
        "--bus-router", default="", help="ROUTER address (default: under --runtime-dir)"
    )


def resolve(args: argparse.Namespace) -> tuple[str, str]:
    """The addresses the flags ask for; creates the runtime dir (0700) for ipc."""
    pub, router = bus_addresses(args.runtime_dir)
    if not (args.bus_pub and args.bus_router):
        os.makedirs(args.runtime_dir, mode=0o700, exist_ok=True)
    return args.bus_pub or pub, args.bus_router or router
