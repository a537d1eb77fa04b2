"""Runs one simulator on an event loop until told to stop.

Shared by the `pyccm sim openstack` process (stopped by SIGTERM/SIGINT) and the test
handle (stopped from another thread): bind, build the cloud, write the configs, report
readiness exactly once, serve, and shut the listener down cleanly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from pyccm_sim.openstack.app import build_app
from pyccm_sim.openstack.cloud import Cloud
from pyccm_sim.openstack.seed import ConfigPaths, SeedSpec, write_config
from pyccm_sim.openstack.settings import Knobs, SimSettings


@dataclass(frozen=True)
class Ready:
    url: str
    config: ConfigPaths | None
    cloud: Cloud


async def serve(
    *,
    settings: SimSettings,
    knobs: Knobs,
    spec: SeedSpec,
    config_dir: Path | None,
    stop: asyncio.Event,
    on_ready: Callable[[Ready], None],
) -> None:
    cloud = Cloud(settings=settings, knobs=knobs, spec=spec)
    runner = web.AppRunner(build_app(cloud), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, settings.host, settings.port, reuse_address=True)
        await site.start()
        host, port = runner.addresses[0][:2]
        url = f"http://{host}:{port}"
        config = None
        if config_dir is not None:
            config = write_config(
                config_dir,
                url=url,
                settings=settings,
                seeded=cloud.seeded,
                app_credential_id=cloud.keystone.app_credential_id,
            )
        on_ready(Ready(url=url, config=config, cloud=cloud))
        await stop.wait()
    finally:
        await runner.cleanup()
