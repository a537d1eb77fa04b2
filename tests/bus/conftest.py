"""A bus wired over ipc in a temp dir, CURVE key directories, and a bus on 127.0.0.1 that
accepts only one worker's key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pyccm.flags.addresses import load_server_curve
from pyccm.manager.bus import BusSettings
from tests.support.bus import Bus, KeyDirs, make_key_dirs
from tests.support.ports import free_port


@pytest.fixture
def bus(tmp_path: Path) -> Iterator[Bus]:
    wiring = Bus(
        BusSettings(pub_address=f"ipc://{tmp_path}/pub", router_address=f"ipc://{tmp_path}/router")
    )
    yield wiring
    wiring.close()


@pytest.fixture
def keys(tmp_path: Path) -> KeyDirs:
    return make_key_dirs(tmp_path)


@pytest.fixture
def tcp_bus(keys: KeyDirs) -> Iterator[Bus]:
    """A bus on 127.0.0.1 whose manager accepts only the `keys.worker` key."""
    wiring = Bus(
        BusSettings(
            pub_address=f"tcp://127.0.0.1:{free_port()}",
            router_address=f"tcp://127.0.0.1:{free_port()}",
            curve=load_server_curve(keys.manager),
        )
    )
    yield wiring
    wiring.close()
