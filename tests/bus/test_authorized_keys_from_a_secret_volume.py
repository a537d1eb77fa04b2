"""The manager's authorized/ directory as a Kubernetes Secret volume lays it out: each file a
symlink into `..data`, itself a symlink to a timestamped directory that the kubelet replaces
whole on an update. A worker key added by such an update is accepted without a restart."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pyccm.flags.addresses import load_client_curve, load_server_curve
from pyccm.keys_command import add_worker, generate
from pyccm.manager.bus import BusSettings
from tests.support.bus import Bus
from tests.support.nodes import node
from tests.support.ports import free_port
from tests.support.waiting import eventually


def project(source: Path, volume: Path, generation: int) -> None:
    """What the kubelet's atomic writer does: new files in a new directory, `..data` swapped
    to it in one rename, a symlink per key pointing through `..data`."""
    payload = volume / f"..2026_11_25_12_00_0{generation}"
    payload.mkdir()
    for key in source.glob("*.key"):
        shutil.copy(key, payload / key.name)
    staged = volume / "..data_tmp"
    staged.symlink_to(payload.name)
    os.replace(staged, volume / "..data")
    for key in source.glob("*.key"):
        link = volume / key.name
        if not link.is_symlink():
            link.symlink_to(Path("..data") / key.name)


def test_a_worker_key_added_by_a_secret_update_is_accepted_without_a_restart(
    tmp_path: Path,
) -> None:
    keys = tmp_path / "keys"
    generate(keys, ["node"], force=False)
    # The manager's --bus-curve-dir: its key pair, and authorized/ as a Secret volume.
    mounted = tmp_path / "etc-pyccm-bus"
    (mounted / "authorized").mkdir(parents=True)
    shutil.copy(keys / "manager" / "server.key_secret", mounted / "server.key_secret")
    project(keys / "manager" / "authorized", mounted / "authorized", 1)
    bus = Bus(
        BusSettings(
            pub_address=f"tcp://127.0.0.1:{free_port()}",
            router_address=f"tcp://127.0.0.1:{free_port()}",
            curve=load_server_curve(mounted),
        )
    )
    try:
        manager = bus.manager()
        manager.cache.nodes.upsert(node("a", 1))
        _, first = bus.worker(curve=load_client_curve(keys / "workers" / "node"))
        eventually(first.synced.is_set)
        add_worker(keys, "node-2", force=False)
        project(keys / "manager" / "authorized", mounted / "authorized", 2)
        _, second = bus.worker("node-2", curve=load_client_curve(keys / "workers" / "node-2"))
        eventually(lambda: len(second.nodes()) == 1)
    finally:
        bus.close()
