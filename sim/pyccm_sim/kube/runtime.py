"""Starting and stopping the simulator: on the current event loop (the `pyccm sim kube`
process) or on a background thread (tests and benchmarks, see testing.py).

The listening socket is bound before anything is announced, so the URL printed on the
readiness line or returned to a test is already accepting connections.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import signal
import sys
from pathlib import Path

import yaml
from aiohttp import web

from pyccm_sim.kube.seed import seed
from pyccm_sim.kube.server import KubeSim
from pyccm_sim.kube.settings import Faults, SimSettings


class Running:
    """A started simulator on the current loop: its state, URL and aiohttp runner.
    With TLS, `ca_file` is the PEM file clients must trust."""

    def __init__(
        self, sim: KubeSim, runner: web.AppRunner, url: str, scratch: Path | None = None
    ) -> None:
        self.sim = sim
        self.runner = runner
        self.url = url
        self.scratch = scratch

    @property
    def ca_file(self) -> Path | None:
        return None if self.scratch is None else self.scratch / "sim-cert.pem"

    async def stop(self) -> None:
        # End the watch streams first, so runner.cleanup() does not wait on them.
        self.sim.store.cut_watches()
        await self.runner.cleanup()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)


async def start(settings: SimSettings, faults: Faults | None = None) -> Running:
    sim = KubeSim(settings=settings, faults=faults)
    seed(
        sim.api,
        nodes=settings.seed_nodes,
        services=settings.seed_services,
        cluster_ip_services=settings.seed_cluster_ip_services,
    )
    runner = web.AppRunner(
        sim.application(), access_log=None, handler_cancellation=True, shutdown_timeout=0.5
    )
    await runner.setup()
    scratch, context, ca_pem = None, None, None
    if settings.tls:
        from pyccm_sim.kube.tls import scratch_dir, self_signed

        certificate = self_signed(settings.host)
        scratch = scratch_dir()
        context = certificate.server_context(scratch, settings.client_ca_file)
        ca_pem = certificate.cert_pem
    site = web.TCPSite(runner, settings.host, settings.port, ssl_context=context)
    await site.start()
    port = _bound_port(runner)
    sim.server_address = f"{settings.host}:{port}"
    url = f"{'https' if settings.tls else 'http'}://{settings.host}:{port}"
    if settings.kubeconfig_out is not None:
        write_kubeconfig(
            settings.kubeconfig_out, url=url, token=settings.admin_token, ca_pem=ca_pem
        )
    return Running(sim, runner, url, scratch)


def _bound_port(runner: web.AppRunner) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple):
            return int(address[1])
    raise RuntimeError("the simulator is not listening on a TCP port")


def kubeconfig(
    *, url: str, token: str, user: str = "admin", ca_pem: bytes | None = None
) -> dict[str, object]:
    cluster: dict[str, str] = {"server": url}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "pyccm-sim", "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "pyccm-sim", "context": {"cluster": "pyccm-sim", "user": user}}],
        "current-context": "pyccm-sim",
        "preferences": {},
    }


def write_kubeconfig(
    path: Path, *, url: str, token: str, user: str = "admin", ca_pem: bytes | None = None
) -> None:
    """Write atomically and owner-only: the file holds a bearer token."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        config = kubeconfig(url=url, token=token, user=user, ca_pem=ca_pem)
        yaml.safe_dump(config, handle, sort_keys=False)
    temporary.replace(path)


async def serve_until_signalled(settings: SimSettings, faults: Faults | None = None) -> int:
    """The `pyccm sim kube` process: start, print one readiness line, stop on SIGTERM/SIGINT."""
    running = await start(settings, faults)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    where = f" (kubeconfig: {settings.kubeconfig_out})" if settings.kubeconfig_out else ""
    sys.stdout.write(f"pyccm sim kube: ready at {running.url}{where}\n")
    sys.stdout.flush()
    await stop.wait()
    await running.stop()
    return 0
