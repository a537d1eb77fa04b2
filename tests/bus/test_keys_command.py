"""`pyccm keys`: the keys it makes let a worker handshake with a manager, it never replaces
keys unasked, its errors are one line and exit 2, and its Secrets hold exactly the files."""

from __future__ import annotations

import base64
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from pyccm.flags.addresses import load_client_curve, load_server_curve
from pyccm.manager.bus import BusSettings
from tests.support.bus import Bus
from tests.support.nodes import node
from tests.support.ports import free_port
from tests.support.waiting import eventually

WORKERS = ("node", "lifecycle", "service", "route")


def keys(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pyccm", "keys", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def generated(tmp_path: Path) -> Path:
    directory = tmp_path / "bus-keys"
    result = keys("generate", directory, "--workers", ",".join(WORKERS))
    assert result.returncode == 0, result.stderr
    return directory


def tcp_bus(manager_dir: Path) -> Bus:
    return Bus(
        BusSettings(
            pub_address=f"tcp://127.0.0.1:{free_port()}",
            router_address=f"tcp://127.0.0.1:{free_port()}",
            curve=load_server_curve(manager_dir),
        )
    )


@pytest.fixture
def manager_on(generated: Path) -> Iterator[Bus]:
    bus = tcp_bus(generated / "manager")
    yield bus
    bus.close()


def test_generate_writes_the_layout_with_private_modes(generated: Path) -> None:
    manager = generated / "manager"
    assert sorted(p.name for p in (manager / "authorized").iterdir()) == sorted(
        f"{name}.key" for name in WORKERS
    )
    secrets = [manager / "server.key_secret"]
    secrets += [generated / "workers" / name / "client.key_secret" for name in WORKERS]
    for path in secrets:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    directories = [generated, manager, manager / "authorized", generated / "workers"]
    directories += [generated / "workers" / name for name in WORKERS]
    for directory in directories:
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    # Every worker trusts the one manager key, and the manager accepts every worker key.
    server = load_server_curve(manager)
    for name in WORKERS:
        client = load_client_curve(generated / "workers" / name)
        assert client.server_key == server.public_key
        assert (manager / "authorized" / f"{name}.key").read_text().count(
            client.public_key.decode()
        ) == 1


def test_generated_keys_let_a_worker_handshake_with_a_manager(
    generated: Path, manager_on: Bus
) -> None:
    manager = manager_on.manager()
    manager.cache.nodes.upsert(node("a", 1))
    _, replica = manager_on.worker(curve=load_client_curve(generated / "workers" / "node"))
    eventually(lambda: [n.metadata.name for n in replica.nodes()] == ["a"])


def test_a_worker_added_later_is_accepted_without_restarting_the_manager(
    generated: Path, manager_on: Bus
) -> None:
    manager = manager_on.manager()
    manager.cache.nodes.upsert(node("a", 1))
    result = keys("add-worker", generated, "node-2")
    assert result.returncode == 0, result.stderr
    _, replica = manager_on.worker(curve=load_client_curve(generated / "workers" / "node-2"))
    eventually(lambda: len(replica.nodes()) == 1)


def test_existing_keys_are_kept_unless_forced(generated: Path) -> None:
    secret = generated / "manager" / "server.key_secret"
    before = secret.read_text()
    refused = keys("generate", generated)
    assert refused.returncode == 2
    assert refused.stderr.strip().count("\n") == 0
    assert str(secret) in refused.stderr
    assert "--force" in refused.stderr
    assert secret.read_text() == before
    assert keys("add-worker", generated, "node").returncode == 2
    forced = keys("generate", generated, "--workers", "node", "--force")
    assert forced.returncode == 0, forced.stderr
    assert secret.read_text() != before
    # A worker not named keeps its key pair but trusts the new manager key.
    server = load_server_curve(generated / "manager")
    assert load_client_curve(generated / "workers" / "route").server_key == server.public_key


@pytest.mark.parametrize(
    "args",
    [
        ("generate", "{file}"),
        ("add-worker", "{empty}", "node"),
        ("secrets", "{empty}"),
        ("generate", "{empty}", "--workers", "Node_1"),
        ("add-worker", "{empty}", "../escape"),
    ],
    ids=["dir-is-a-file", "add-without-manager", "secrets-without-keys", "bad-name", "bad-path"],
)
def test_a_wrong_directory_or_name_is_one_line_and_exit_2(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "empty").mkdir()
    paths = {"file": tmp_path / "a-file", "empty": tmp_path / "empty"}
    result = keys(*(arg.format(**paths) for arg in args))
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith("pyccm keys: ")
    assert not (tmp_path / "escape").exists()


def test_the_secrets_parse_and_hold_exactly_the_files(generated: Path) -> None:
    result = keys("secrets", generated, "--namespace", "ccm", "--prefix", "bus")
    assert result.returncode == 0, result.stderr
    documents = list(yaml.safe_load_all(result.stdout))
    assert all(d["kind"] == "Secret" and d["apiVersion"] == "v1" for d in documents)
    assert all(d["metadata"]["namespace"] == "ccm" for d in documents)
    decoded = {
        d["metadata"]["name"]: {k: base64.b64decode(v) for k, v in d["data"].items()}
        for d in documents
    }
    manager, workers = generated / "manager", generated / "workers"
    expected = {
        "bus-manager": {"server.key_secret": (manager / "server.key_secret").read_bytes()},
        "bus-authorized": {
            f"{name}.key": (manager / "authorized" / f"{name}.key").read_bytes() for name in WORKERS
        },
    }
    for name in WORKERS:
        expected[f"bus-worker-{name}"] = {
            file: (workers / name / file).read_bytes()
            for file in ("server.key", "client.key_secret")
        }
    assert decoded == expected


def test_only_the_secrets_output_shows_key_material(tmp_path: Path) -> None:
    directory = tmp_path / "k"
    outputs = [keys("generate", directory), keys("add-worker", directory, "extra")]
    secret_values = [
        line.split("=", 1)[1].strip().strip('"')
        for path in directory.rglob("*.key*")
        for line in path.read_text().splitlines()
        if "-key =" in line
    ]
    assert secret_values
    for result in outputs:
        assert result.returncode == 0, result.stderr
        for value in secret_values:
            assert value not in result.stdout + result.stderr
