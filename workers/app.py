"""Builds and runs one worker process from its flags."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
import uuid
from pathlib import Path
from types import FrameType

from protocol.addresses import resolve
from protocol.controllers import canonical
from protocol.messages import SessionId
from provider.errors import ConfigError
from provider.interface import Cloud
from provider.registry import create_cloud
from provider.settings import ProviderSettings
from workers.lifecycle.controller import LifecycleController, LifecycleSettings
from workers.node.controller import NodeController, NodeSettings
from workers.runtime.bus import BusClient, BusClientSettings
from workers.runtime.controller import Controller
from workers.runtime.replica import Replica
from workers.runtime.runner import Runner, RunnerSettings, Transport

log = logging.getLogger(__name__)


def build_controller(
    name: str, *, args: argparse.Namespace, cloud: Cloud, replica: Replica
) -> tuple[Controller, int]:
    """The controller and its number of sync threads; ConfigError when the cloud lacks it."""
    instances = cloud.instances()
    if name in ("cloud-node", "cloud-node-lifecycle") and instances is None:
        raise ConfigError(f"cloud provider {cloud.name!r} has no instances support")
    assert instances is not None
    if name == "cloud-node":
        node = NodeSettings(
            workers=args.concurrent_node_syncs,
            status_update_frequency=args.node_status_update_frequency,
        )
        return NodeController(replica=replica, instances=instances, settings=node), node.workers
    if name == "cloud-node-lifecycle":
        life = LifecycleSettings(
            monitor_period=args.node_monitor_period, workers=args.concurrent_node_probes
        )
        return LifecycleController(
            replica=replica, instances=instances, settings=life
        ), life.workers
    raise ConfigError(f"the {name} worker is not built yet")


def main(args: argparse.Namespace) -> int:
    name = canonical(args.controller)
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s"
    )
    try:
        cloud = create_cloud(
            args.cloud_provider,
            settings=ProviderSettings(
                cloud_config=Path(args.cloud_config) if args.cloud_config else None,
                cluster_name=args.cluster_name,
                cloud_api_qps=args.cloud_api_qps,
                cloud_api_burst=args.cloud_api_burst,
            ),
        )
        replica = Replica()
        controller, threads = build_controller(name, args=args, cloud=cloud, replica=replica)
    except ConfigError as error:
        print(f"pyccm worker {name}: {error}")
        return 2
    transport = _transport(args, name=name, controller=controller, replica=replica)
    runner = Runner(
        controller=controller,
        replica=replica,
        transport=transport,
        settings=RunnerSettings(workers=threads),
    )
    return _serve(runner, transport)


def _transport(
    args: argparse.Namespace, *, name: str, controller: Controller, replica: Replica
) -> Transport:
    if args.standalone:
        from kubeapi.client import KubeSettings
        from workers.runtime.standalone import StandaloneTransport

        return StandaloneTransport(
            kube=KubeSettings(kubeconfig=args.kubeconfig), topics=controller.topics, replica=replica
        )
    pub, router = resolve(args)
    return BusClient(
        settings=BusClientSettings(pub_address=pub, router_address=router),
        worker=name,
        session=SessionId(uuid.uuid4().hex),
        topics=controller.topics,
        replica=replica,
    )


def _serve(runner: Runner, transport: Transport) -> int:
    stop = threading.Event()

    def terminate(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, terminate)
    runner.start()
    transport.start()  # type: ignore[attr-defined]
    while not stop.wait(0.5):
        fatal = getattr(transport, "fatal", None)
        if fatal is not None:
            log.error("exiting: %s", fatal)
            return 2
    runner.stop()
    transport.stop()  # type: ignore[attr-defined]
    return 0
