"""`pyccm keys`: the bus's CURVE keys for split mode, made in one step (manager/BUS.md).

`generate DIR` writes one directory per party, each exactly what that party's
`--bus-curve-dir` reads (flags/addresses.py):

    DIR/manager/server.key_secret          the manager's key pair (every replica shares it)
    DIR/manager/authorized/<worker>.key    the public key of each worker it accepts
    DIR/workers/<worker>/server.key        the manager's public key
    DIR/workers/<worker>/client.key_secret that worker's key pair

Directories are 0700 and secret files 0600, written under a temporary name and renamed,
so a secret is never readable by others even for a moment. Existing keys are never
replaced without `--force`. `add-worker DIR NAME` adds one worker key (the manager reads
new authorized keys at the next handshake, no restart). `secrets DIR` prints Kubernetes
Secret manifests for `kubectl apply -f -`: that output is the only place key material is
ever printed; every message here names files, never their contents.
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pyccm.flags.addresses import (
    AUTHORIZED_DIR,
    CLIENT_SECRET,
    SERVER_PUBLIC,
    SERVER_SECRET,
    CurveKeyError,
    load_server_curve,
)

MANAGER_DIR = "manager"
WORKERS_DIR = "workers"
# One key per worker kind by default; shards of the service worker share theirs.
DEFAULT_WORKERS = ("node", "lifecycle", "service", "route")
DEFAULT_PREFIX = "pyccm-bus"
# A worker's name becomes part of a file name and of a Secret's name: a DNS-1123 label.
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?")

_SECRET_BANNER = """\
#   ****  Generated on {now} by pyccm keys  ****
#   ZeroMQ CURVE **Secret** Certificate
#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.

"""
_PUBLIC_BANNER = """\
#   ****  Generated on {now} by pyccm keys  ****
#   ZeroMQ CURVE Public Certificate

"""


class KeyLayoutError(ValueError):
    """A one-line reason the command cannot do what it was asked (names paths, never keys)."""


@dataclass(frozen=True)
class KeyPair:
    public: bytes
    secret: bytes = b""

    def __repr__(self) -> str:
        return "KeyPair(...)"  # never a key in a traceback or a log line


def new_key_pair() -> KeyPair:
    import zmq  # not at the top: `pyccm --help` must not pay for libzmq

    public, secret = zmq.curve_keypair()
    return KeyPair(public=public, secret=secret)


def certificate(pair: KeyPair) -> str:
    """zmq.auth's certificate format (`zmq.auth.load_certificate` reads it back)."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    lines = ["metadata", "curve", f'    public-key = "{pair.public.decode()}"']
    if pair.secret:
        lines.append(f'    secret-key = "{pair.secret.decode()}"')
    banner = _SECRET_BANNER if pair.secret else _PUBLIC_BANNER
    return banner.format(now=now) + "\n".join(lines) + "\n"


# --- the layout -------------------------------------------------------------------------


def worker_names(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise KeyLayoutError("--workers names no worker")
    for name in names:
        check_name(name)
    if len(set(names)) != len(names):
        raise KeyLayoutError(f"--workers names a worker twice: {text}")
    return names


def check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise KeyLayoutError(
            f"worker name {name!r} must be lower-case letters, digits and '-' (at most 42), "
            "as it names a file and a Kubernetes Secret"
        )


def generate(directory: Path, workers: Sequence[str], *, force: bool) -> list[Path]:
    """A new manager key pair and one key pair per worker; returns the files written.

    With `force`, every other worker directory already in `directory` gets the new
    `server.key` too (its own key pair is kept), so none is left trusting an old manager key.
    """
    server = new_key_pair()
    planned: dict[Path, tuple[KeyPair, int]] = {
        directory / MANAGER_DIR / SERVER_SECRET: (server, 0o600)
    }
    for name in workers:
        planned.update(_worker_files(directory, name, server, new_key_pair()))
    if force:
        for other in _existing_workers(directory):
            if other not in workers:
                planned[directory / WORKERS_DIR / other / SERVER_PUBLIC] = (
                    KeyPair(public=server.public),
                    0o644,
                )
    return _write_all(directory, planned, force=force)


def add_worker(directory: Path, name: str, *, force: bool) -> list[Path]:
    """One more worker key pair, trusted by the manager whose key `directory` holds."""
    check_name(name)
    try:
        server = load_server_curve(directory / MANAGER_DIR)
    except CurveKeyError as error:
        raise KeyLayoutError(f"{error}: run `pyccm keys generate {directory}` first") from None
    pair = KeyPair(public=server.public_key)
    return _write_all(directory, _worker_files(directory, name, pair, new_key_pair()), force=force)


def _worker_files(
    directory: Path, name: str, server: KeyPair, worker: KeyPair
) -> dict[Path, tuple[KeyPair, int]]:
    own = directory / WORKERS_DIR / name
    return {
        directory / MANAGER_DIR / AUTHORIZED_DIR / f"{name}.key": (
            KeyPair(public=worker.public),
            0o644,
        ),
        own / SERVER_PUBLIC: (KeyPair(public=server.public), 0o644),
        own / CLIENT_SECRET: (worker, 0o600),
    }


def _existing_workers(directory: Path) -> list[str]:
    workers = directory / WORKERS_DIR
    if not workers.is_dir():
        return []
    return sorted(path.name for path in workers.iterdir() if (path / CLIENT_SECRET).is_file())


def _write_all(
    directory: Path, planned: dict[Path, tuple[KeyPair, int]], *, force: bool
) -> list[Path]:
    if directory.exists() and not directory.is_dir():
        raise KeyLayoutError(f"{directory} is not a directory")
    if not force:
        for path in planned:
            if path.exists():
                raise KeyLayoutError(f"{path} already exists (--force replaces it)")
    try:
        for path, (pair, mode) in planned.items():
            _make_dirs(directory, path.parent)
            _write(path, certificate(pair), mode)
    except OSError as error:
        where = error.filename or directory
        raise KeyLayoutError(f"cannot write {where}: {error.strerror}") from None
    return list(planned)


def _make_dirs(top: Path, directory: Path) -> None:
    """`top` (0700 if made here) and the layout's directories below it, each 0700 whatever
    the umask, even if they already existed."""
    if not top.exists():
        top.mkdir(mode=0o700, parents=True)
        os.chmod(top, 0o700)
    path = top
    for part in directory.relative_to(top).parts:
        path = path / part
        path.mkdir(mode=0o700, exist_ok=True)
        os.chmod(path, 0o700)


def _write(path: Path, text: str, mode: int) -> None:
    # Created with its final mode and renamed over the old file: never world-readable, and
    # a reader (the manager's authorized/ scan) never sees half a file.
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(handle, mode)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


# --- Kubernetes Secrets -------------------------------------------------------------------


def secret_manifests(directory: Path, *, namespace: str, prefix: str) -> str:
    """Secret manifests for `kubectl apply -f -`, one YAML document each:

    `<prefix>-manager` (server.key_secret), `<prefix>-authorized` (every authorized
    `*.key`, mounted at the manager's `authorized/`), and `<prefix>-worker-<name>`
    (server.key and client.key_secret) for each worker directory.
    """
    import yaml

    manager = directory / MANAGER_DIR
    if not (manager / SERVER_SECRET).is_file():
        raise KeyLayoutError(
            f"{manager / SERVER_SECRET} does not exist: run `pyccm keys generate {directory}`"
        )
    authorized = sorted((manager / AUTHORIZED_DIR).glob("*.key"))
    documents = [
        _secret(f"{prefix}-manager", namespace, [manager / SERVER_SECRET]),
        _secret(f"{prefix}-authorized", namespace, authorized),
    ]
    for name in _existing_workers(directory):
        own = directory / WORKERS_DIR / name
        files = [own / SERVER_PUBLIC, own / CLIENT_SECRET]
        documents.append(_secret(f"{prefix}-worker-{name}", namespace, files))
    return yaml.safe_dump_all(documents, sort_keys=False)


def _secret(name: str, namespace: str, files: Iterable[Path]) -> dict[str, object]:
    data = {path.name: base64.b64encode(path.read_bytes()).decode() for path in files}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "pyccm", "app.kubernetes.io/component": "bus"},
        },
        "type": "Opaque",
        "data": data,
    }


# --- the command line ---------------------------------------------------------------------


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "keys",
        help="make the bus's CURVE keys for split mode, and Secrets holding them",
        description="Make the CURVE keys the manager and tcp:// workers need (manager/BUS.md), "
        "add a worker key, or print them as Kubernetes Secrets.",
    )
    actions = parser.add_subparsers(
        dest="keys_action", metavar="ACTION", required=True, help="what to do with the keys"
    )
    generate_parser = actions.add_parser(
        "generate",
        help="a manager key pair and one key pair per worker, in DIR",
        description="Write DIR/manager (the manager's --bus-curve-dir) and DIR/workers/NAME "
        "(each worker's). Existing keys are kept unless --force.",
    )
    generate_parser.add_argument("directory", metavar="DIR", type=Path, help="key directory")
    generate_parser.add_argument(
        "--workers",
        default=",".join(DEFAULT_WORKERS),
        help="comma-separated worker key names, one key pair each (default %(default)s)",
    )
    _force_flag(generate_parser)
    add_parser = actions.add_parser(
        "add-worker",
        help="one more worker key pair, authorized by DIR's manager",
        description="Write DIR/workers/NAME and DIR/manager/authorized/NAME.key. A running "
        "manager accepts the new key at its next handshake once its authorized/ files are "
        "updated (no restart).",
    )
    add_parser.add_argument("directory", metavar="DIR", type=Path, help="key directory")
    add_parser.add_argument("name", metavar="NAME", help="the new worker key's name")
    _force_flag(add_parser)
    secrets_parser = actions.add_parser(
        "secrets",
        help="print DIR's keys as Kubernetes Secret manifests (for kubectl apply -f -)",
        description="Print one Secret for the manager's key pair (PREFIX-manager), one for "
        "the authorized worker keys (PREFIX-authorized) and one per worker "
        "(PREFIX-worker-NAME). This prints secret keys: send it to kubectl, not to a log.",
    )
    secrets_parser.add_argument("directory", metavar="DIR", type=Path, help="key directory")
    secrets_parser.add_argument(
        "--namespace", default="kube-system", help="the Secrets' namespace (default %(default)s)"
    )
    secrets_parser.add_argument(
        "--prefix", default=DEFAULT_PREFIX, help="Secret name prefix (default %(default)s)"
    )
    parser.set_defaults(run=run)


def _force_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--force", action="store_true", help="replace keys that already exist")


def run(args: argparse.Namespace) -> int:
    try:
        match args.keys_action:
            case "generate":
                written = generate(args.directory, worker_names(args.workers), force=args.force)
            case "add-worker":
                written = add_worker(args.directory, args.name, force=args.force)
            case _:
                sys.stdout.write(
                    secret_manifests(args.directory, namespace=args.namespace, prefix=args.prefix)
                )
                return 0
    except KeyLayoutError as error:
        print(f"pyccm keys: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"pyccm keys: cannot read {error.filename}: {error.strerror}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    return 0
