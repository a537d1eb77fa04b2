"""The `pyccm sim openstack` process body: build settings from flags, serve until a signal."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from pyccm.logs import configure
from pyccm_sim.openstack.cli import READY_PREFIX, knob_values
from pyccm_sim.openstack.seed import SeedSpec
from pyccm_sim.openstack.server import Ready, serve
from pyccm_sim.openstack.settings import Knobs, SimSettings


def main(args: argparse.Namespace) -> int:
    configure(
        process="sim-openstack",
        log_format=args.log_format,
        level=logging.INFO if args.verbose else logging.WARNING,
    )
    knobs = Knobs()
    try:
        knobs.update(knob_values(args))
        spec = SeedSpec(
            nodes=args.seed_nodes,
            shutoff=args.seed_shutoff,
            deleted=args.seed_deleted,
            floating_ips=args.seed_floating_ips,
            zones=tuple(z for z in args.zones.split(",") if z) or ("nova",),
        )
    except ValueError as error:
        print(f"pyccm sim openstack: {error}", file=sys.stderr)
        return 2
    settings = SimSettings(
        host=args.host,
        port=args.port,
        region=args.region,
        random_seed=args.random_seed,
        token_ttl_s=args.token_ttl,
        access_log=args.verbose,
    )
    return asyncio.run(_run(settings=settings, knobs=knobs, spec=spec, args=args))


async def _run(
    *, settings: SimSettings, knobs: Knobs, spec: SeedSpec, args: argparse.Namespace
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    def announce(ready: Ready) -> None:
        where = f" (config: {args.write_config})" if ready.config is not None else ""
        print(f"{READY_PREFIX}{ready.url}{where}", flush=True)

    try:
        await serve(
            settings=settings,
            knobs=knobs,
            spec=spec,
            config_dir=args.write_config,
            stop=stop,
            on_ready=announce,
        )
    except OSError as error:
        print(
            f"pyccm sim openstack: cannot listen on {settings.host}:{settings.port}: {error}",
            file=sys.stderr,
        )
        return 1
    return 0
