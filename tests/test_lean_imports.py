"""Which process may never load which package (docs/architecture.md#lean-imports).

Each case imports, in a fresh interpreter, the modules one kind of process runs (the `pyccm`
entry point, its app and, for a worker, the OpenStack provider's modules) and lists the
packages in `sys.modules` that it must not carry: each one is megabytes in every process of
that kind (`python -m bench.tree_memory`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.tree_memory import MANAGER_MODULES as MANAGER
from bench.tree_memory import WORKER_MODULES as WORKER
from pyccm_sim.openstack.seed import CLOUD_NAME
from pyccm_sim.openstack.testing import OpenStackSimHandle

# Packages (and pyccm's own modules) by name: each stands for itself and what is below it.
CASES = {
    # openstacksdk (clouds.yaml) and keystoneauth1 (Keystone) run in short-lived children,
    # and the provider's calls go out on urllib3; cryptography serves the manager's TLS;
    # kubeapi reads kubeconfigs itself; the `pyccm` entry point imports only the module of
    # the command that runs.
    "worker": (
        WORKER,
        {
            *("openstack", "keystoneauth1", "requests", "cryptography", "kubernetes", "asyncio"),
            *("pyccm.manager", "pyccm_sim.demo", "pyccm_sim", "pyccm.gc_command"),
        },
    ),
    # The manager loads cryptography only to make a self-signed serving certificate, and
    # asyncio only for zmq's CURVE authenticator (tcp:// buses).
    "manager": (
        MANAGER,
        {
            *("openstack", "keystoneauth1", "requests", "kubernetes", "cryptography", "asyncio"),
            *("pyccm.workers", "pyccm.provider.openstack", "pyccm_sim.demo", "pyccm_sim"),
        },
    ),
}


def loaded_modules(modules: tuple[str, ...]) -> set[str]:
    code = (
        "import importlib, json, sys\n"
        f"for name in {list(modules)!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return set(json.loads(done.stdout))


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_process_does_not_load_what_it_does_not_run(kind: str) -> None:
    modules, forbidden = CASES[kind]

    loaded = loaded_modules(modules)

    assert (
        sorted(
            name for name in forbidden if any(m == name or m.startswith(f"{name}.") for m in loaded)
        )
        == []
    )


def test_the_manager_makes_its_self_signed_certificate_without_loading_cryptography() -> None:
    """The secure port's generated certificate comes from a child process
    (`pyccm.manager.certificate`): the manager serves it and never maps cryptography."""
    code = (
        "import sys\n"
        "from pyccm.manager.serving import ServingSettings, server_context\n"
        "server_context(ServingSettings())\n"
        "print('cryptography' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )

    assert done.stdout.split() == ["False"]


def test_a_worker_with_use_clouds_authenticates_without_loading_the_openstack_libraries(
    sim: OpenStackSimHandle, tmp_path: Path
) -> None:
    """clouds.yaml is read by openstacksdk's loader and Keystone is asked by keystoneauth1,
    each in a child process (`clouds.py`, `authenticate.py`): the worker that reads
    `use-clouds = true` and makes a cloud call keeps neither library, nor requests."""
    conf = tmp_path / "cloud.conf"
    conf.write_text(
        f"[Global]\nuse-clouds = true\nclouds-file = {sim.clouds_yaml_path}\ncloud = {CLOUD_NAME}\n"
    )
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from pyccm.provider.openstack.transport.client import build_client\n"
        "from pyccm.provider.openstack.config import load_settings\n"
        "from pyccm.provider.settings import ProviderSettings\n"
        f"settings = load_settings(Path({str(conf)!r}), environ={{}})\n"
        "client = build_client(settings=settings, provider_settings=ProviderSettings())\n"
        "client.call('compute', 'GET', '/flavors', request='flavor_list')\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(json.loads(done.stdout))

    heavy = ("openstack", "keystoneauth1", "requests")
    assert sorted(m for m in loaded if m.split(".")[0] in heavy) == []
    assert "pyccm.provider.openstack.config" in loaded  # it did read the settings
