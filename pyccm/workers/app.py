"""Builds and runs one worker process from its flags."""

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

from pyccm.logs import configure
from pyccm.protocol.addresses import client_curve, resolve
from pyccm.protocol.controllers import canonical
from pyccm.protocol.load_balancer_class import UNCLASSED, load_balancer_classes
from pyccm.protocol.messages import SessionId
from pyccm.provider.errors import ConfigError
from pyccm.provider.interface import Cloud, ReloadableCloud
from pyccm.provider.registry import create_cloud
from pyccm.provider.settings import ProviderSettings
from pyccm.workers.lifecycle.controller import LifecycleController, LifecycleSettings
from pyccm.workers.node.controller import NodeController, NodeSettings
from pyccm.workers.route.cidrs import parse_cluster_cidrs
from pyccm.workers.route.controller import RouteController, RouteSettings
from pyccm.workers.runtime.bus import BusClient, BusClientSettings, ask_cluster_id
from pyccm.workers.runtime.commit import Committer, Transport
from pyccm.workers.runtime.controller import Controller, Disabled, DisabledController
from pyccm.workers.runtime.identity import resolve_cluster_id
from pyccm.workers.runtime.reload import ConfigReloader
from pyccm.workers.runtime.replica import Replica
from pyccm.workers.runtime.runner import Runner, RunnerSettings
from pyccm.workers.service.controller import ServiceController, ServiceSettings
from pyccm.workers.service.policy import Shard

log = logging.getLogger(__name__)

DISABLED = Gauge(
    "pyccm_controller_disabled",
    "1 when this worker's controller cannot run here (see its log for why).",
    ["controller"],
    multiprocess_mode="max",
)


def build_controller(
    name: str, *, args: argparse.Namespace, cloud: Cloud, replica: Replica, commit: Committer
) -> tuple[Controller, int]:
    """The controller and its number of sync threads.

    Raises ConfigError for a bad flag, `Disabled` for a controller that cannot run here
    (upstream skips such a controller at start and runs the others).
    """
    if name in ("cloud-node", "cloud-node-lifecycle"):
        instances = cloud.instances()
        if instances is None:
            raise Disabled(f"cloud provider {cloud.name!r} has no instances support")
        if name == "cloud-node":
            node = NodeSettings(
                workers=args.concurrent_node_syncs,
                status_update_frequency=args.node_status_update_frequency,
            )
            return NodeController(replica=replica, instances=instances, settings=node), node.workers
        life = LifecycleSettings(
            monitor_period=args.node_monitor_period, workers=args.concurrent_node_probes
        )
        return LifecycleController(
            replica=replica, instances=instances, settings=life
        ), life.workers
    if name == "service":
        load_balancers = cloud.load_balancers()
        if load_balancers is None:
            raise Disabled(f"cloud provider {cloud.name!r} has no load-balancer support")
        try:
            shard = Shard.parse(args.shard)
            classes = load_balancer_classes(args)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        service = ServiceSettings(
            workers=args.concurrent_service_syncs,
            resync_period=args.lb_resync_period,
            shard=shard,
            classes=classes,
            orphan_scan_period=args.orphan_scan_period,
        )
        controller = ServiceController(
            replica=replica, load_balancers=load_balancers, commit=commit, settings=service
        )
        return controller, service.workers
    if name == "route":
        if args.configure_cloud_routes != "true":
            raise Disabled("--configure-cloud-routes=false")
        routes = cloud.routes()
        if routes is None:
            raise Disabled(f"cloud provider {cloud.name!r} has no routes support")
        try:
            cidrs = parse_cluster_cidrs(args.cluster_cidr)
        except ConfigError as error:
            raise Disabled(str(error)) from None
        route = RouteSettings(
            cluster_cidrs=cidrs, reconciliation_period=args.route_reconciliation_period
        )
        return RouteController(replica=replica, routes=routes, settings=route), 1
    raise ConfigError(f"unknown controller {name!r}")


def check_flags(name: str, args: argparse.Namespace) -> None:
    """The controller's own flags, checked before the worker talks to anyone: ConfigError
    for a bad one (exit 2). An invalid --cluster-cidr only disables the route controller
    (build_controller says why), as the README promises."""
    if name != "service":
        return
    try:
        Shard.parse(args.shard)
        load_balancer_classes(args)
    except ValueError as error:
        raise ConfigError(str(error)) from None


def _routes_wanted(args: argparse.Namespace) -> bool:
    if args.configure_cloud_routes != "true":
        return False
    try:
        parse_cluster_cidrs(args.cluster_cidr)
    except ConfigError:
        return False
    return True


def _cluster_id(name: str, args: argparse.Namespace, *, worker: str) -> str:
    """Only the service worker creates resources that carry it (routes: the router's tag).
    `--cluster-id` if given; standalone, the worker reads it; on the bus, the manager tells."""
    if name not in ("service", "route"):
        return ""
    if name == "route" and not _routes_wanted(args):
        return ""  # a disabled route controller (build_controller says why) claims nothing
    if args.cluster_id or args.standalone:
        return resolve_cluster_id(given=args.cluster_id, kubeconfig=args.kubeconfig, required=False)
    pub, router = resolve(args)
    bus = BusClientSettings(pub_address=pub, router_address=router, curve=client_curve(args))
    return ask_cluster_id(bus, worker=worker)


def _cloud(name: str, args: argparse.Namespace, *, worker: str) -> Cloud:
    """The cloud, its configuration checked before the worker talks to anyone (an unknown
    provider or a bad cloud.conf: ConfigError, exit 2, not a wait for the manager). The
    cluster id, when this controller needs one and no flag gives it, comes after (from the
    manager, or the API): the cloud is then built again with it. A cloud builds no
    connection before its first call, so the first one costs a parse of cloud.conf."""
    settings = ProviderSettings(
        cloud_config=Path(args.cloud_config) if args.cloud_config else None,
        cluster_name=args.cluster_name,
        cluster_id=args.cluster_id,
        cloud_api_qps=args.cloud_api_qps,
        cloud_api_burst=args.cloud_api_burst,
    )
    cloud = create_cloud(args.cloud_provider, settings=settings)
    cluster_id = _cluster_id(name, args, worker=worker)
    if cluster_id == settings.cluster_id:
        return cloud
    cloud.close()
    return create_cloud(args.cloud_provider, settings=replace(settings, cluster_id=cluster_id))


def process_name(name: str, args: argparse.Namespace) -> str:
    """The worker's name in its log lines: its bus name (`service-1` for shard 1 of n)."""
    if name != "service":
        return name
    try:
        return name + Shard.parse(args.shard).suffix
    except ValueError:
        return name  # the bad flag is reported by check_flags


def main(args: argparse.Namespace) -> int:
    name = canonical(args.controller)
    worker = process_name(name, args)
    configure(process=worker, log_format=args.log_format)
    try:
        check_flags(name, args)
        cloud = _cloud(name, args, worker=worker)
        replica = Replica()
        commit = Committer(controller=name)
        controller, threads = build_controller(
            name, args=args, cloud=cloud, replica=replica, commit=commit
        )
    except Disabled as disabled:
        # Not a crash of the tree: the process stays up (healthy, doing nothing), says why
        # once, and shows it in pyccm_controller_disabled.
        log.error("the %s controller is disabled: %s", name, disabled)
        DISABLED.labels(controller=name).set(1)
        controller, threads = DisabledController(name), 0
    except ConfigError as error:
        print(f"pyccm worker {name}: {error}", file=sys.stderr)
        return 2
    transport = _transport(
        args, name=controller.name, view=name, controller=controller, replica=replica
    )
    runner = Runner(
        controller=controller,
        replica=replica,
        transport=transport,
        settings=RunnerSettings(workers=threads),
        committer=commit,
    )
    return _serve(runner, transport, _reloader(args, cloud=cloud, runner=runner))


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
    args: argparse.Namespace, *, name: str, view: str, controller: Controller, replica: Replica
) -> Transport:
    """The bus (or the standalone informers); `view` is the canonical controller name,
    which picks what the manager sends this worker (protocol.projections)."""
    if args.standalone:
        from pyccm.kubeapi.client import KubeSettings
        from pyccm.protocol.projections import views
        from pyccm.workers.runtime.standalone import StandaloneTransport

        # The manager's projection, with the service controller's claim of classes.
        classes = controller.classes if isinstance(controller, ServiceController) else UNCLASSED
        return StandaloneTransport(
            kube=KubeSettings(kubeconfig=args.kubeconfig),
            view=view,
            topics=controller.topics,
            replica=replica,
            views=views(classes),
        )
    pub, router = resolve(args)
    return BusClient(
        settings=BusClientSettings(
            pub_address=pub, router_address=router, curve=client_curve(args)
        ),
        worker=name,
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
    transport.start()  # type: ignore[attr-defined]
    if reloader is not None:
        reloader.start()
    while not stop.wait(0.5):
        fatal = getattr(transport, "fatal", None)
        if fatal is not None:
            log.error("exiting: %s", fatal)
            return 2
    if reloader is not None:
        reloader.stop()
    runner.stop()
    transport.stop()  # type: ignore[attr-defined]
    return 0
