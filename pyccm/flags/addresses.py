"""Where the bus lives and who may use it: the addresses and CURVE keys both ends share.

By default the bus is two ipc:// sockets under a 0700 runtime directory: one pod, one
supervisord, and the file mode is the access control. A worker in another pod needs
tcp://, and a tcp port is open to anyone who can reach it, so (docs/architecture.md#bus-addresses)
any address that
is not ipc:// or inproc:// requires CURVE: the manager's sockets are CURVE servers that
accept only the worker public keys it was given, and workers connect as CURVE clients.
A tcp:// address without keys is a one-line configuration error (exit 2) on both sides,
never a silently open port; ipc:// takes keys too but does not need them.

The key directory (`--bus-curve-dir`) holds zmq.auth certificate files (manager/BUS.md):

    server.key          the manager's public key (workers read it)
    server.key_secret   the manager's key pair (the manager reads it)
    client.key_secret   this worker's key pair (workers read it)
    authorized/*.key    public keys of the workers the manager accepts (the manager)

Secret keys live in `repr=False` fields and only file paths ever appear in messages.

In split mode several manager replicas sit behind one Service, and only the leader serves
workers. A manager started with `--bus-advertise-address HOST` (its pod IP) advertises its
own sockets as `tcp://HOST:<port>`; the leader writes them on its Lease
(`BUS_ENDPOINTS_ANNOTATION`), and a worker that reached any replica is told where to go.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

DEFAULT_RUNTIME_DIR = os.environ.get("PYCCM_RUNTIME_DIR", "/run/pyccm")

# Transports that never leave the host and are guarded by the file system (ipc) or the
# process (inproc); everything else (tcp, ws, pgm, ...) needs CURVE.
LOCAL_SCHEMES = ("ipc://", "inproc://")

SERVER_PUBLIC = "server.key"
SERVER_SECRET = "server.key_secret"
CLIENT_SECRET = "client.key_secret"
AUTHORIZED_DIR = "authorized"
KEY_LENGTH = 40

# On the leader's Lease: its advertised "PUB,ROUTER" addresses (manager/BUS.md).
BUS_ENDPOINTS_ANNOTATION = "pyccm.io/bus-endpoints"


@dataclass(frozen=True)
class ServerCurve:
    """The manager's CURVE identity and the directory of worker keys it accepts."""

    public_key: bytes
    secret_key: bytes = field(repr=False)
    authorized: Path


@dataclass(frozen=True)
class ClientCurve:
    """A worker's CURVE identity and the manager public key it trusts."""

    public_key: bytes
    secret_key: bytes = field(repr=False)
    server_key: bytes


class CurveKeyError(ValueError):
    """A key file is missing or is not a zmq.auth certificate (the message names the path)."""


def needs_curve(address: str) -> bool:
    return not address.startswith(LOCAL_SCHEMES)


def require_curve(addresses: tuple[str, ...], curve: object | None) -> None:
    """ValueError when an address leaves the host and there are no keys to guard it."""
    exposed = [address for address in addresses if needs_curve(address)]
    if exposed and curve is None:
        raise ValueError(
            f"{exposed[0]} is not ipc://, so it needs CURVE keys (--bus-curve-dir); "
            "see manager/BUS.md"
        )


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
    parser.add_argument(
        "--bus-curve-dir",
        default=os.environ.get("PYCCM_BUS_CURVE_DIR", ""),
        metavar="DIR",
        help="zmq.auth CURVE certificates; required for tcp:// (layout: manager/BUS.md)",
    )
    # Config errors name the command they belong to ("pyccm manager: ...").
    parser.set_defaults(bus_prog=parser.prog)


def add_advertise_flag(parser: argparse.ArgumentParser) -> None:
    """The manager's --bus-advertise-address (workers only dial, they advertise nothing)."""
    parser.add_argument(
        "--bus-advertise-address",
        default=os.environ.get("PYCCM_BUS_ADVERTISE_ADDRESS", ""),
        metavar="HOST",
        help="this replica's own address (in Kubernetes its pod IP), with the ports of "
        "--bus-pub/--bus-router: the leader names it to workers that reach a standby or a "
        "Service (default $PYCCM_BUS_ADVERTISE_ADDRESS or none: workers stay where they dial)",
    )


def advertised(host: str, pub: str, router: str) -> tuple[str, str]:
    """`tcp://HOST:<port>` for each bound address; ValueError when that cannot be said."""
    if not host or any(c.isspace() or c in ",/" for c in host):
        raise ValueError(f"--bus-advertise-address {host!r} is not a host name or IP address")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 address
    return _advertised(host, pub, "--bus-pub"), _advertised(host, router, "--bus-router")


def _advertised(host: str, bound: str, flag: str) -> str:
    port = bound.rpartition(":")[2]
    if not bound.startswith("tcp://") or not port.isdigit() or int(port) == 0:
        raise ValueError(
            f"--bus-advertise-address needs {flag} to bind tcp://HOST:PORT with a fixed "
            f"port, not {bound}"
        )
    return f"tcp://{host}:{port}"


def advertise(args: argparse.Namespace, pub: str, router: str) -> tuple[str, str] | None:
    """The manager's advertised (PUB, ROUTER) addresses, or None; a bad flag exits 2."""
    if not args.bus_advertise_address:
        return None
    try:
        return advertised(args.bus_advertise_address, pub, router)
    except ValueError as error:
        _config_error(args, str(error))


def format_endpoints(endpoints: tuple[str, str]) -> str:
    return ",".join(endpoints)


def parse_endpoints(text: str) -> tuple[str, str] | None:
    """The annotation's (PUB, ROUTER) addresses; None when it is absent or not two tcp://
    addresses (anyone allowed to edit the Lease could have written it: CURVE still makes
    sure a worker only ever talks to a holder of the manager's secret key)."""
    parts = tuple(part.strip() for part in text.split(","))
    if len(parts) != 2 or not all(part.startswith("tcp://") for part in parts):
        return None
    return parts[0], parts[1]


def resolve(args: argparse.Namespace) -> tuple[str, str]:
    """The (PUB, ROUTER) addresses the flags ask for; creates the runtime dir (0700) for ipc.

    A non-local address without --bus-curve-dir ends the process: one line, exit 2.
    """
    pub, router = bus_addresses(args.runtime_dir)
    addresses = (args.bus_pub or pub, args.bus_router or router)
    try:
        require_curve(addresses, args.bus_curve_dir or None)
    except ValueError as error:
        _config_error(args, str(error))
    if not (args.bus_pub and args.bus_router):
        os.makedirs(args.runtime_dir, mode=0o700, exist_ok=True)
    return addresses


def server_curve(args: argparse.Namespace) -> ServerCurve | None:
    """The manager's keys from --bus-curve-dir (None without it); a bad dir exits 2."""
    if not args.bus_curve_dir:
        return None
    try:
        return load_server_curve(Path(args.bus_curve_dir))
    except CurveKeyError as error:
        _config_error(args, str(error))


def client_curve(args: argparse.Namespace) -> ClientCurve | None:
    """A worker's keys from --bus-curve-dir (None without it); a bad dir exits 2."""
    if not args.bus_curve_dir:
        return None
    try:
        return load_client_curve(Path(args.bus_curve_dir))
    except CurveKeyError as error:
        _config_error(args, str(error))


def load_server_curve(directory: Path) -> ServerCurve:
    public, secret = _key_pair(directory / SERVER_SECRET)
    authorized = directory / AUTHORIZED_DIR
    if not authorized.is_dir():
        raise CurveKeyError(f"{authorized} is not a directory of worker public keys (*.key)")
    return ServerCurve(public_key=public, secret_key=secret, authorized=authorized)


def load_client_curve(directory: Path) -> ClientCurve:
    public, secret = _key_pair(directory / CLIENT_SECRET)
    server, _ = _certificate(directory / SERVER_PUBLIC)
    return ClientCurve(public_key=public, secret_key=secret, server_key=server)


def _key_pair(path: Path) -> tuple[bytes, bytes]:
    public, secret = _certificate(path)
    if secret is None:
        raise CurveKeyError(f"{path} has no secret key")
    return public, secret


def _certificate(path: Path) -> tuple[bytes, bytes | None]:
    # zmq is imported here, not at the top: the CLI modules import this one and
    # `pyccm --help` must not pay for libzmq.
    import zmq.auth

    if not path.is_file():
        raise CurveKeyError(f"CURVE certificate {path} does not exist")
    try:
        public, secret = zmq.auth.load_certificate(path)
    except OSError as error:
        raise CurveKeyError(f"cannot read CURVE certificate {path}: {error.strerror}") from None
    except ValueError:
        raise CurveKeyError(f"{path} is not a zmq.auth certificate (no public key)") from None
    # Never echo a key: the file holds a secret. Z85 keys are 40 characters.
    if len(public) != KEY_LENGTH or (secret is not None and len(secret) != KEY_LENGTH):
        raise CurveKeyError(f"{path} holds a key that is not {KEY_LENGTH} Z85 characters")
    return public, secret


def _config_error(args: argparse.Namespace, message: str) -> NoReturn:
    print(f"{getattr(args, 'bus_prog', 'pyccm')}: {message}", file=sys.stderr)
    raise SystemExit(2)
