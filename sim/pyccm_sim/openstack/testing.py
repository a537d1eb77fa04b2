"""Run the OpenStack simulator inside a test or benchmark, and poke at it from Python.

    from pyccm_sim.openstack.testing import running_openstack_sim

    with running_openstack_sim(seed_nodes=3, provisioning_delay_s=0.01) as sim:
        conn = sim.connection()                      # openstacksdk, from the written clouds.yaml
        mark = sim.mark()
        ...                                          # drive the code under test
        assert not sim.writes(since=mark)            # "this sync made no write calls"
        assert sim.inventory()["loadbalancer"] == 1  # "exactly one load balancer exists"

`running_openstack_sim(**options)` starts the server on 127.0.0.1 with an ephemeral port
in a background thread with its own event loop, writes `clouds.yaml` (cloud `pyccm-sim`,
password auth; `pyccm-sim-appcred` for application credentials) and an upstream-style
`cloud.conf` into `config_dir` (a temporary directory by default), and yields an
`OpenStackSimHandle`. Options are the `SeedSpec` fields (`seed_nodes`, `shutoff`,
`deleted`, `floating_ips`, `zones`), `SimSettings` fields (`region`, `random_seed`,
`token_ttl_s`) and any `Knobs` field (`provisioning_delay_s`, `octavia_version`,
`lb_quota`, `batch_members`, `disabled_extensions`, `error_rates`, ...).

Every handle method is thread-safe: it runs on the simulator's event loop and waits for
the answer. A session-scoped simulator can be returned to its seeded state between tests
with `handle.reset()` (same ids, so the written configs stay valid).

`connection()` returns an openstacksdk `Connection`. The simulator itself never imports
openstacksdk (an import contract forbids it); this test-support helper loads it lazily by
name, and only when a test asks for a connection.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar

from pyccm_sim.openstack.calllog import Call, Seq
from pyccm_sim.openstack.seed import (
    APPCRED_CLOUD_NAME,
    CLOUD_NAME,
    ConfigPaths,
    SeededCloud,
    SeedSpec,
)
from pyccm_sim.openstack.server import Ready, serve
from pyccm_sim.openstack.settings import Credentials, FailRule, Knobs, SimSettings

T = TypeVar("T")
SPEC_OPTIONS = {
    "seed_nodes": "nodes",
    "shutoff": "shutoff",
    "deleted": "deleted",
    "floating_ips": "floating_ips",
    "zones": "zones",
    "dual_stack": "dual_stack",
}
SETTINGS_OPTIONS = frozenset({"region", "random_seed", "token_ttl_s", "credentials"})
START_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 30.0


class OpenStackSimHandle:
    """A running simulator: where it is, how to connect, and operator-side controls."""

    cloud_name = CLOUD_NAME
    appcred_cloud_name = APPCRED_CLOUD_NAME

    def __init__(
        self,
        *,
        ready: Ready,
        loop: asyncio.AbstractEventLoop,
        config: ConfigPaths,
        settings: SimSettings,
    ) -> None:
        self._cloud = ready.cloud
        self._loop = loop
        self.url: str = ready.url
        self.config_dir: Path = config.clouds_yaml.parent
        self.clouds_yaml_path: Path = config.clouds_yaml
        self.cloud_conf_path: Path = config.cloud_conf
        self.ids_json_path: Path = config.ids_json
        self.region: str = settings.region
        self.credentials: Credentials = settings.credentials
        self.seeded: SeededCloud = ready.cloud.seeded

    def _on_loop(self, action: Callable[[], T]) -> T:
        async def run() -> T:
            return action()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(CALL_TIMEOUT_S)

    # -- clients -------------------------------------------------------------------------

    def connection(self, cloud: str = CLOUD_NAME, **overrides: Any) -> Any:
        """An openstacksdk Connection built from the written clouds.yaml (env vars ignored)."""
        # Test-only: declared in .importlinter as the one place sim/ may use openstacksdk.
        from openstack import config as config_module
        from openstack import connection as connection_module

        loader = config_module.OpenStackConfig(
            config_files=[str(self.clouds_yaml_path)],
            vendor_files=[],
            secure_files=[],
            load_envvars=False,
        )
        with warnings.catch_warnings():
            # openstacksdk 4.x warns (PendingDeprecationWarning, InfluxDB metrics) on every
            # CloudRegion it builds, configured or not; not ours to fix, and fatal under
            # pytest's filterwarnings=error.
            warnings.filterwarnings(
                "ignore", category=PendingDeprecationWarning, module="openstack"
            )
            region = loader.get_one(cloud=cloud, **overrides)
            return connection_module.Connection(config=region)

    # -- call log and counters ---------------------------------------------------------------

    def mark(self) -> Seq:
        """A point in the call log; pass it to `calls(since=...)` / `writes(since=...)`."""
        return self._cloud.calls.mark()

    def calls(self, since: Seq | None = None) -> list[Call]:
        return self._cloud.calls.since(since or Seq(0))

    def writes(self, since: Seq | None = None) -> list[Call]:
        """POST/PUT/PATCH/DELETE calls to Nova, Neutron and Octavia (token requests excluded)."""
        return [call for call in self.calls(since) if call.is_write]

    def clear_calls(self) -> None:
        self._cloud.calls.clear()

    def counters(self) -> dict[str, dict[str, int]]:
        """Per resource kind: created / updated / deleted since seeding (or the last reset)."""
        return self._on_loop(self._cloud.counters.snapshot)

    def inventory(self) -> dict[str, int]:
        """How many of each resource kind exist now, e.g. `inventory()["loadbalancer"]`."""
        return self._on_loop(self._cloud.inventory)

    def resources(self, kind: str) -> list[dict[str, Any]]:
        """Copies of every row of one kind: server, port, floatingip, router, loadbalancer, ..."""
        return self._on_loop(lambda: self._cloud.snapshot(kind))

    # -- knobs and faults ------------------------------------------------------------------

    def knobs(self) -> dict[str, Any]:
        return self._on_loop(self._cloud.knobs.as_dict)

    def set_knobs(self, **changes: Any) -> None:
        self._on_loop(lambda: self._cloud.knobs.update(changes))

    def fail_next(
        self,
        service: str,
        status: int,
        *,
        count: int = 1,
        retry_after_s: float | None = None,
        methods: tuple[str, ...] = (),
    ) -> None:
        """The next `count` calls to `service` ("*" for any) answer `status`."""
        rule = FailRule(
            service=service,
            status=status,
            count=count,
            retry_after_s=retry_after_s,
            methods=methods,
        )
        self._on_loop(lambda: self._cloud.knobs.fail_next.append(rule))

    def revoke_tokens(self) -> int:
        """Forget every token: each client's next call gets a 401 and re-authenticates."""
        return self._on_loop(self._cloud.keystone.revoke_all)

    def stick_load_balancer(self, lb_id: str) -> None:
        """Pin a load balancer in PENDING_UPDATE until `release_load_balancer`."""
        self._on_loop(lambda: self._cloud.octavia.stick(lb_id))

    def release_load_balancer(self, lb_id: str) -> None:
        self._on_loop(lambda: self._cloud.octavia.release(lb_id))

    # -- seeding -----------------------------------------------------------------------------

    def add_server(
        self,
        index: int,
        *,
        status: str = "ACTIVE",
        floating_ip: bool = False,
        zone: str | None = None,
    ) -> dict[str, Any]:
        """A server for `sim.scenario` node `index` (its name and InternalIP)."""
        return self._on_loop(
            lambda: dict(
                self._cloud.add_node_server(
                    index, status=status, floating_ip=floating_ip, zone=zone
                )
            )
        )

    def set_server_status(self, name: str, status: str) -> None:
        """E.g. "SHUTOFF" to shut a node's VM down, "ACTIVE" to start it again."""
        self._on_loop(
            lambda: self._cloud.nova.set_status(self._cloud.server_by_name(name)["id"], status)
        )

    def delete_server(self, name: str) -> None:
        """Delete a node's server and its ports (the node's VM is gone)."""
        self._on_loop(
            lambda: self._cloud.nova.delete_server(self._cloud.server_by_name(name)["id"])
        )

    def add_floating_ip(self, server_name: str) -> str:
        """Associate a new floating IP with the server's port; returns the address."""
        return self._on_loop(
            lambda: str(self._cloud.add_floating_ip(server_name)["floating_ip_address"])
        )

    def reset(self, *, knobs: bool = True, calls: bool = True) -> None:
        """Back to the freshly seeded cloud (same ids); keep knobs or calls if asked."""
        self._on_loop(lambda: self._cloud.reset(knobs=knobs, calls=calls))

    def settle(self, timeout_s: float = 10.0) -> None:
        """Wait until no load balancer is PENDING_* (pinned ones excepted)."""
        deadline = time.monotonic() + timeout_s

        def pending() -> bool:
            octavia = self._cloud.octavia
            return any(
                lb["provisioning_status"].startswith("PENDING") and lb["id"] not in octavia.stuck
                for lb in octavia.loadbalancers
            )

        while self._on_loop(pending):
            if time.monotonic() > deadline:
                raise TimeoutError("load balancers still PENDING_* after the deadline")
            time.sleep(0.005)


def _split_options(options: dict[str, Any]) -> tuple[SeedSpec, SimSettings, dict[str, Any]]:
    spec_fields = {SPEC_OPTIONS[k]: v for k, v in options.items() if k in SPEC_OPTIONS}
    for name in ("shutoff", "deleted", "floating_ips"):
        if name in spec_fields:
            spec_fields[name] = frozenset(spec_fields[name])
    if "zones" in spec_fields:
        spec_fields["zones"] = tuple(spec_fields["zones"])
    settings_fields = {k: v for k, v in options.items() if k in SETTINGS_OPTIONS}
    knob_fields = {
        k: v for k, v in options.items() if k not in SPEC_OPTIONS and k not in SETTINGS_OPTIONS
    }
    return SeedSpec(**spec_fields), SimSettings(**settings_fields), knob_fields


@contextmanager
def running_openstack_sim(
    *, config_dir: Path | None = None, **options: Any
) -> Iterator[OpenStackSimHandle]:
    """Start a simulator in a background thread; stop it when the block exits."""
    spec, settings, knob_fields = _split_options(options)
    knobs = Knobs()
    knobs.update(knob_fields)
    with ExitStack() as stack:
        directory = config_dir or Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="pyccm-os-"))
        )
        loop = asyncio.new_event_loop()
        started = threading.Event()
        box: dict[str, Any] = {}

        def on_ready(ready: Ready) -> None:
            box["ready"] = ready
            started.set()

        async def main() -> None:
            box["stop"] = asyncio.Event()
            try:
                await serve(
                    settings=settings,
                    knobs=knobs,
                    spec=spec,
                    config_dir=directory,
                    stop=box["stop"],
                    on_ready=on_ready,
                )
            except BaseException as error:
                box["error"] = error
                started.set()
                raise

        thread = threading.Thread(
            target=lambda: _run_loop(loop, main()), name="openstack-sim", daemon=True
        )
        thread.start()
        if not started.wait(START_TIMEOUT_S) or "error" in box:
            raise RuntimeError(f"OpenStack simulator did not start: {box.get('error')!r}")
        ready: Ready = box["ready"]
        assert ready.config is not None
        try:
            yield OpenStackSimHandle(ready=ready, loop=loop, config=ready.config, settings=settings)
        finally:
            loop.call_soon_threadsafe(box["stop"].set)
            thread.join(timeout=START_TIMEOUT_S)


def _run_loop(loop: asyncio.AbstractEventLoop, main: Any) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(main)
    except BaseException:
        pass
    finally:
        loop.close()
