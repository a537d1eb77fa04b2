"""Builds and runs one worker process from its flags.

The order is what makes a bad configuration fail at once: the controller's flags
(its spec's `prepare`), the bus flags and the provider's configuration are all checked
before the worker asks anyone anything; only then may it wait for the manager (the cluster
id), build its controller and start. Nothing here knows a controller by name: each one's
spec (`workers.registry`) says what it needs.
"""

from __future__ import annotations

import argparse
import gc
import logging
import signal
import sys
import threading
import uuid
from dataclasses import replace
from pathlib import Path
from types import FrameType

from prometheus_client import Gauge

from pyccm.flags.addresses import client_curve, resolve
from pyccm.kubeapi.errors import KubeConfigError
from pyccm.logs import configure
from pyccm.protocol.controllers import canonical
from pyccm.protocol.messages import SessionId
from pyccm.provider.errors import ConfigError
from pyccm.provider.interface import Cloud, ReloadableCloud
from pyccm.provider.registry import create_cloud
from pyccm.provider.settings import ProviderSettings
from pyccm.workers.registry import SPECS
from pyccm.workers.runtime.bus import BusClient, BusClientSettings, ask_cluster_id
from pyccm.workers.runtime.commit import Committer, Transport
from pyccm.workers.runtime.controller import Controller, Disabled, DisabledController
from pyccm.workers.runtime.identity import resolve_cluster_id
from pyccm.workers.runtime.reload import ConfigReloader
from pyccm.workers.runtime.replica import Replica
from pyccm.workers.runtime.runner import Runner, RunnerSettings
from pyccm.workers.runtime.spec import Parts, Plan

log = logging.getLogger(__name__)

DISABLED = Gauge(
    "pyccm_controller_disabled",
    "1 when this worker's controller cannot run here (see its log for why).",
    ["controller"],
    multiprocess_mode="max",
)


def main(args: argparse.Namespace) -> int:
    name = canonical(args.controller)
    try:
        plan = SPECS[name].prepare(args)
        configure(process=plan.worker, log_format=args.log_format)
        bus = None if args.standalone else _bus_settings(args)
        cloud = _cloud(args, plan=plan, bus=bus)
    except ConfigError as error:
        print(f"pyccm worker {name}: {error}", file=sys.stderr)
        return 2
    replica = Replica()
    commit = Committer(controller=name)
    try:
        controller, threads = plan.build(Parts(cloud=cloud, replica=replica, commit=commit))
    except Disabled as disabled:
        # Not a crash of the tree: the process stays up (healthy, doing nothing), says why
        # once, and shows it in pyccm_controller_disabled.
        log.error("the %s controller is disabled: %s", name, disabled)
        DISABLED.labels(controller=name).set(1)
        controller, threads = DisabledController(plan.worker), 0
    try:
        transport = _transport(
            args, bus=bus, view=name, plan=plan, controller=controller, replica=replica
        )
    except KubeConfigError as error:  # standalone: its kubeconfig (or in-cluster setup)
        print(f"pyccm worker {name}: {error}", file=sys.stderr)
        return 2
    runner = Runner(
        controller=controller,
        replica=replica,
        transport=transport,
        settings=RunnerSettings(workers=threads),
        committer=commit,
    )
    return _serve(runner, transport, _reloader(args, cloud=cloud, runner=runner))


def _bus_settings(args: argparse.Namespace) -> BusClientSettings:
    """The bus flags, checked (a tcp:// address without CURVE keys, a missing key file:
    one line and exit 2, from pyccm.flags.addresses)."""
    pub, router = resolve(args)
    return BusClientSettings(pub_address=pub, router_address=router, curve=client_curve(args))


def _cloud(args: argparse.Namespace, *, plan: Plan, bus: BusClientSettings | None) -> Cloud:
    """The cloud, its configuration checked before the worker talks to anyone (an unknown
    provider or a bad cloud.conf: ConfigError, exit 2, not a wait for the manager). The
    cluster id, when the controller needs one and no flag gives it, comes after (from the
    manager, or the API): the cloud is then built again with it. A cloud opens no
    connection before its first call, so the first build costs a parse of cloud.conf."""
    if not (args.cloud_api_qps > 0 and args.cloud_api_burst >= 1):
        raise ConfigError("--cloud-api-qps must be above 0 and --cloud-api-burst at least 1")
    settings = ProviderSettings(
        cloud_config=Path(args.cloud_config) if args.cloud_config else None,
        cluster_name=args.cluster_name,
        cluster_id=args.cluster_id,
        cloud_api_qps=args.cloud_api_qps,
        cloud_api_burst=args.cloud_api_burst,
    )
    cloud = create_cloud(args.cloud_provider, settings=settings)
    if not plan.needs_cluster_id or args.cluster_id:
        return cloud
    if bus is None:
        # Standalone: the worker reads it (none, said once, when it cannot).
        cluster_id = resolve_cluster_id(given="", kubeconfig=args.kubeconfig, required=False)
    else:
        cluster_id = ask_cluster_id(bus, worker=plan.worker)
    if not cluster_id:
        return cloud
    cloud.close()
    return create_cloud(args.cloud_provider, settings=replace(settings, cluster_id=cluster_id))


def _reloader(args: argparse.Namespace, *, cloud: Cloud, runner: Runner) -> ConfigReloader | None:
    """Keeps the cloud configuration current (`--cloud-config-reload-period`, SIGHUP); none
    for a provider that cannot reload, or a disabled controller (nothing uses the cloud)."""
    if not isinstance(cloud, ReloadableCloud) or isinstance(runner.controller, DisabledController):
        return None
    return ConfigReloader(
        cloud=cloud,
        controller=runner.controller.name,
        period=args.cloud_config_reload_period,
        wake=runner.wake,
    )


def _transport(
    args: argparse.Namespace,
    *,
    bus: BusClientSettings | None,
    view: str,
    plan: Plan,
    controller: Controller,
    replica: Replica,
) -> Transport:
    """The bus (or, without one, the standalone informers); `view` is the canonical
    controller name, which picks what the manager sends this worker (protocol.projections)."""
    if bus is None:
        from pyccm.kubeapi.client import KubeSettings
        from pyccm.protocol.projections import views
        from pyccm.workers.runtime.standalone import StandaloneTransport

        # The manager's projection, with the classes of Services the controller claims.
        return StandaloneTransport(
            kube=KubeSettings(kubeconfig=args.kubeconfig),
            view=view,
            topics=controller.topics,
            replica=replica,
            views=views(plan.classes),
        )
    return BusClient(
        settings=bus,
        worker=controller.name,
        session=SessionId(uuid.uuid4().hex),
        view=view,
        topics=controller.topics,
        replica=replica,
    )


def _serve(runner: Runner, transport: Transport, reloader: ConfigReloader | None) -> int:
    stop = threading.Event()

    def terminate(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, terminate)
    if reloader is not None:
        # SIGHUP re-reads the cloud configuration now (it used to end the process).
        signal.signal(signal.SIGHUP, lambda signum, frame: reloader.request())
    # Everything built so far (modules, the cloud client, the controller) lives until exit:
    # moved out of the collector's reach, it is neither rescanned by every full collection
    # nor collected at interpreter exit, which took 0.25-0.6 s of the 2 s a worker has to
    # stop after SIGTERM.
    gc.freeze()
    runner.start()
    transport.start()
    if reloader is not None:
        reloader.start()
    while not stop.wait(0.5):
        if transport.fatal is not None:
            log.error("exiting: %s", transport.fatal)
            return 2
    if reloader is not None:
        reloader.stop()
    runner.stop()
    transport.stop()
    return 0
