"""The kube simulator as a test fixture: `running_kube_sim(**knobs)`.

    from pyccm_sim.kube.testing import running_kube_sim

    with running_kube_sim(seed_nodes=3, seed_services=2) as kube:
        client = KubeClient(settings=KubeSettings(kubeconfig=str(kube.kubeconfig_path)))
        client.request("GET", "/api/v1/nodes")        # through HTTP, like any client
        kube.get("nodes", "node-0000")                # the stored JSON, straight from the store
        kube.set_node_ready("node-0001", False)       # the "kubelet" helper
        kube.set_faults(error_rates={"patch": 1.0})   # every PATCH now fails with 500
        kube.cut_watches()                            # end every open watch stream
        kube.expire_next_watches(1)                   # the next watch gets 410 Expired
        kube.wait_for("nodes", "node-0000", lambda n: not n["spec"].get("taints"))

The server runs on 127.0.0.1 with an ephemeral port, on its own event loop in a
background thread, so synchronous tests, threads and other event loops can all use it.
`knobs` are `SimSettings` fields (seed_nodes, seed_services, rbac (enforce RBAC from the
roles and bindings stored, e.g. applied with kubectl), rbac_files, tokens, tls,
history_size, bookmark_interval, watch_buffer, random_seed, ...). Every helper on the
handle is thread-safe: it runs on the server's loop and waits for the result.

Knobs worth knowing: `kube.url`, `kube.token` (admin, group system:masters),
`kube.kubeconfig_path` (a written kubeconfig with that token), `kube.ca_file` (with
`tls=True`: the server certificate to trust), `kube.add_token(token, user, groups)` for a
second identity (with `rbac_files=(Path("deploy/base/rbac.yaml"),)` to test permissions as
the CCM's ServiceAccount), `kube.requests()` (the request log: method, path, verb, user,
code) and `kube.resource_version`. With `tls=True`, `client_ca_file=` accepts client
certificates that CA signed, and `passwords=` basic-auth users.

The official `kubernetes` client, pointed at a simulator, is the tests' business
(`tests.support.kube_http.api_client`): nothing in `pyccm/` imports it.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from pyccm_sim.kube import runtime
from pyccm_sim.kube.resources import NODES, resource_named
from pyccm_sim.kube.seed import seed, set_node_ready
from pyccm_sim.kube.server import KubeSim
from pyccm_sim.kube.settings import SimSettings, User

Obj = dict[str, Any]
T = TypeVar("T")


class KubeSimHandle:
    """A running simulator seen from another thread."""

    def __init__(
        self, *, loop: asyncio.AbstractEventLoop, running: runtime.Running, kubeconfig_path: Path
    ) -> None:
        self._loop = loop
        self._running = running
        self.url = running.url
        self.token = running.sim.settings.admin_token
        self.kubeconfig_path = kubeconfig_path
        # With tls: the PEM file of the server's certificate, for clients to trust.
        self.ca_file = running.ca_file

    # -- plumbing -----------------------------------------------------------------------

    def call(self, function: Callable[[KubeSim], T]) -> T:
        """Run `function(sim)` on the server's loop and return its result (or raise)."""

        async def run() -> T:
            return function(self._running.sim)

        return self._await(run())

    def _await(self, coroutine: Coroutine[Any, Any, T]) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(timeout=60)

    @property
    def sim(self) -> KubeSim:
        """The server object itself; touch it only through `call` from other threads."""
        return self._running.sim

    def add_token(self, token: str, user: str, groups: tuple[str, ...] = ()) -> None:
        def add(sim: KubeSim) -> None:
            sim.tokens[token] = User(user, groups)

        self.call(add)

    # -- objects ------------------------------------------------------------------------

    def seed(self, *, nodes: int = 0, services: int = 0, cluster_ip_services: int = 0) -> None:
        self.call(
            lambda sim: seed(
                sim.api,
                nodes=nodes,
                services=services,
                cluster_ip_services=cluster_ip_services,
                first_node=sim.store.count(NODES),
            )
        )

    def create(self, resource: str, body: Obj, namespace: str = "") -> Obj:
        rtype = resource_named(resource)
        return self.call(lambda sim: sim.api.create(rtype, namespace, body).thaw())

    def get(self, resource: str, name: str, namespace: str = "") -> Obj | None:
        """The object's current JSON from the store, or None if it does not exist."""
        rtype = resource_named(resource)
        ref = (namespace if rtype.namespaced else "", name)

        def read(sim: KubeSim) -> Obj | None:
            entry = sim.store.get(rtype, ref)
            return None if entry is None else entry.thaw()

        return self.call(read)

    def list_objects(self, resource: str, namespace: str | None = None) -> list[Obj]:
        rtype = resource_named(resource)

        def read(sim: KubeSim) -> list[Obj]:
            entries = sim.store.snapshot(rtype).entries
            return [e.thaw() for e in entries if namespace is None or e.ref[0] == namespace]

        return self.call(read)

    def delete(self, resource: str, name: str, namespace: str = "") -> None:
        rtype = resource_named(resource)
        self.call(lambda sim: sim.api.delete(rtype, namespace, name))

    def patch(
        self,
        resource: str,
        name: str,
        patch: bytes,
        *,
        namespace: str = "",
        patch_type: str = "application/strategic-merge-patch+json",
        subresource: str = "",
    ) -> Obj:
        rtype = resource_named(resource)
        return self.call(
            lambda sim: sim.api.patch(
                rtype, namespace, name, patch_type, patch, subresource=subresource
            ).thaw()
        )

    def set_node_ready(self, name: str, ready: bool | str, *, reason: str = "") -> Obj:
        """The kubelet helper: Ready=True/False (or "Unknown") on node `name`."""
        status = ready if isinstance(ready, str) else ("True" if ready else "False")
        return self.call(lambda sim: set_node_ready(sim.api, name, status, reason=reason).thaw())

    def wait_for(
        self,
        resource: str,
        name: str,
        condition: Callable[[Obj | None], bool],
        *,
        namespace: str = "",
        timeout: float = 10.0,
        interval: float = 0.02,
    ) -> Obj | None:
        """Poll the store until `condition(object or None)` holds; TimeoutError otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            current = self.get(resource, name, namespace)
            if condition(current):
                return current
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{resource}/{name}: condition not met in {timeout}s; last: {current}"
                )
            time.sleep(interval)

    @property
    def resource_version(self) -> int:
        return self.call(lambda sim: int(sim.store.rv))

    def requests(self) -> list[Obj]:
        return self.call(lambda sim: [dict(r) for r in sim.requests])

    # -- faults -------------------------------------------------------------------------

    def set_faults(
        self,
        *,
        latency: float | None = None,
        error_rates: dict[str, float] | None = None,
        throttle_rate: float | None = None,
        retry_after: int | None = None,
    ) -> None:
        def apply(sim: KubeSim) -> None:
            if latency is not None:
                sim.faults.latency = latency
            if error_rates is not None:
                sim.faults.error_rates = dict(error_rates)
            if throttle_rate is not None:
                sim.faults.throttle_rate = throttle_rate
            if retry_after is not None:
                sim.faults.retry_after = retry_after

        self.call(apply)

    def cut_watches(self, *, reset: bool = False) -> int:
        """End every open watch: cleanly (`reset=False`) or by dropping the connection."""
        return self.call(lambda sim: sim.store.cut_watches(abort=reset))

    def expire_next_watches(self, count: int = 1) -> None:
        def arm(sim: KubeSim) -> None:
            sim.faults.expire_next_watches = count

        self.call(arm)

    def set_history_size(self, size: int) -> None:
        self.call(lambda sim: sim.store.resize_history(size))

    def open_watches(self) -> int:
        return self.call(lambda sim: len(sim.store.watchers))


@contextmanager
def running_kube_sim(**knobs: Any) -> Iterator[KubeSimHandle]:
    """Start a simulator for the duration of the block; see the module docstring."""
    with tempfile.TemporaryDirectory(prefix="pyccm-kube-sim-") as scratch:
        kubeconfig_path = Path(knobs.pop("kubeconfig_out", None) or Path(scratch) / "kubeconfig")
        settings = SimSettings(port=0, kubeconfig_out=kubeconfig_path, **knobs)
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="kube-sim", daemon=True)
        thread.start()
        try:
            running = asyncio.run_coroutine_threadsafe(runtime.start(settings), loop).result(
                timeout=120
            )
            try:
                yield KubeSimHandle(loop=loop, running=running, kubeconfig_path=kubeconfig_path)
            finally:
                asyncio.run_coroutine_threadsafe(running.stop(), loop).result(timeout=30)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
            loop.close()
