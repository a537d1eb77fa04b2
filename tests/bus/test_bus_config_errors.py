"""A bus that would leave the host without CURVE keys, or with broken ones, never starts."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pyccm.cli import build_parser
from pyccm.flags.addresses import (
    client_curve,
    load_client_curve,
    load_server_curve,
    resolve,
    server_curve,
)
from pyccm.manager.bus import BusSettings
from pyccm.workers.runtime.bus import BusClientSettings
from tests.support.bus import KeyDirs

TCP = ["--bus-pub", "tcp://127.0.0.1:5555", "--bus-router", "tcp://127.0.0.1:5556"]
COMMANDS = {"manager": ["manager"], "worker": ["worker", "node"]}


def parse(command: str, *flags: str) -> argparse.Namespace:
    return build_parser().parse_args([*COMMANDS[command], *flags])


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_tcp_without_curve_keys_is_a_one_line_error_with_exit_code_2(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = parse(command, *TCP, f"--runtime-dir={tmp_path}/run", "--bus-curve-dir=")
    with pytest.raises(SystemExit) as exit_:
        resolve(args)
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"pyccm {command}: tcp://127.0.0.1:5555 is not ipc://, so it needs CURVE keys "
        "(--bus-curve-dir); see manager/BUS.md"
    ]


def test_the_manager_process_exits_2_on_tcp_without_keys() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYCCM_BUS_CURVE_DIR"}
    done = subprocess.run(
        [sys.executable, "-m", "pyccm.cli", "manager", *TCP],
        capture_output=True,
        check=False,
        text=True,
        timeout=30,
        env=env,
    )
    assert done.returncode == 2
    assert "needs CURVE keys" in done.stderr


def test_a_router_alone_on_tcp_also_needs_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = parse(
        "worker",
        f"--bus-pub=ipc://{tmp_path}/pub",
        "--bus-router=tcp://10.0.0.1:5556",
        "--bus-curve-dir=",
    )
    with pytest.raises(SystemExit):
        resolve(args)
    assert "tcp://10.0.0.1:5556 is not ipc://" in capsys.readouterr().err


def test_ipc_needs_no_keys_and_gets_a_private_runtime_dir(tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = parse("manager", f"--runtime-dir={run}", "--bus-curve-dir=")
    assert resolve(args) == (f"ipc://{run}/bus-pub.sock", f"ipc://{run}/bus-router.sock")
    assert run.stat().st_mode & 0o777 == 0o700
    assert server_curve(args) is None


def test_tcp_with_a_key_dir_resolves(keys: KeyDirs) -> None:
    args = parse("worker", *TCP, f"--bus-curve-dir={keys.worker}")
    assert resolve(args) == ("tcp://127.0.0.1:5555", "tcp://127.0.0.1:5556")
    assert client_curve(args) == load_client_curve(keys.worker)


@pytest.mark.parametrize(
    "settings",
    [BusSettings, BusClientSettings],
    ids=["manager", "worker"],
)
def test_bus_settings_refuse_tcp_without_keys(settings: type) -> None:
    with pytest.raises(ValueError, match="needs CURVE keys"):
        settings(pub_address="tcp://127.0.0.1:5555", router_address="ipc:///tmp/router")


@pytest.mark.parametrize(
    ("command", "missing", "loader"),
    [
        ("manager", "server.key_secret", server_curve),
        ("manager", "authorized", server_curve),
        ("worker", "server.key", client_curve),
        ("worker", "client.key_secret", client_curve),
    ],
)
def test_a_key_dir_missing_a_file_is_an_error_naming_it(
    command: str,
    missing: str,
    loader: Callable[[argparse.Namespace], object],
    keys: KeyDirs,
    capsys: pytest.CaptureFixture[str],
) -> None:
    directory = keys.manager if command == "manager" else keys.worker
    target = directory / missing
    if target.is_dir():
        for child in target.iterdir():
            child.unlink()
        target.rmdir()
    else:
        target.unlink()
    args = parse(command, *TCP, f"--bus-curve-dir={directory}")
    with pytest.raises(SystemExit) as exit_:
        loader(args)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pyccm {command}: ")
    assert str(target) in err


def test_a_broken_certificate_is_reported_without_its_secret(
    keys: KeyDirs, capsys: pytest.CaptureFixture[str]
) -> None:
    cert = keys.worker / "client.key_secret"
    secret = next(
        line.split('"')[1] for line in cert.read_text().splitlines() if "secret-key" in line
    )
    # A truncated public key next to an intact secret key.
    cert.write_text(f'curve\n    public-key = "short"\n    secret-key = "{secret}"\n')
    args = parse("worker", *TCP, f"--bus-curve-dir={keys.worker}")
    with pytest.raises(SystemExit):
        client_curve(args)
    err = capsys.readouterr().err
    assert str(cert) in err
    assert secret not in err


def test_loaded_keys_do_not_show_their_secret_in_repr(keys: KeyDirs) -> None:
    server = load_server_curve(keys.manager)
    client = load_client_curve(keys.worker)
    assert server.secret_key.decode() not in repr(server)
    assert client.secret_key.decode() not in repr(client)
    assert client.server_key == server.public_key
