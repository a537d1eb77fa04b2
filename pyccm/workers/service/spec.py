"""The service controller to the worker process (runtime/spec.py): its flags, its checks,
its build. `--shard i/n` names the worker (`service-i`); the cloud must know the cluster
id (the load balancers carry it); the claimed classes also shape the manager's view."""

from __future__ import annotations

import argparse

from pyccm.flags.durations import duration_flag
from pyccm.flags.load_balancer_class import (
    add_load_balancer_class_flags,
    load_balancer_classes,
)
from pyccm.provider.errors import ConfigError
from pyccm.workers.runtime.controller import Controller
from pyccm.workers.runtime.spec import ControllerSpec, Flags, Parts, Plan, positive_int, require
from pyccm.workers.service.policy import Shard

NAME = "service"


def add_flags(flags: Flags) -> None:
    flags.add_argument(
        "--concurrent-service-syncs",
        type=positive_int,
        default=10,
        help="Services synced at once (default %(default)s; upstream's is 1)",
    )
    flags.add_argument(
        "--shard",
        default="0/1",
        help="i/n: own the Services whose key hashes to i mod n (default %(default)s)",
    )
    flags.add_argument(
        "--lb-resync-period",
        type=duration_flag,
        default=600.0,
        help="re-ensure every LB Service this often; reads only unless drifted (default 10m)",
    )
    flags.add_argument(
        "--orphan-scan-period",
        type=duration_flag,
        default=0.0,
        help="this often, warn (event on kube-system, pyccm_orphaned_resources) about cloud "
        "resources of this cluster no Service accounts for; 0 = off (default)",
    )
    add_load_balancer_class_flags(flags)


def prepare(args: argparse.Namespace) -> Plan:
    try:
        shard = Shard.parse(args.shard)
        classes = load_balancer_classes(args)
    except ValueError as error:
        raise ConfigError(str(error)) from None

    def build(parts: Parts) -> tuple[Controller, int]:
        from pyccm.workers.service.controller import ServiceController, ServiceSettings
        from pyccm.workers.service.memory import return_large_buffers

        return_large_buffers()

        load_balancers = require(
            parts.cloud.load_balancers(), cloud=parts.cloud, what="load-balancer"
        )
        settings = ServiceSettings(
            workers=args.concurrent_service_syncs,
            resync_period=args.lb_resync_period,
            shard=shard,
            classes=classes,
            orphan_scan_period=args.orphan_scan_period,
        )
        controller = ServiceController(
            replica=parts.replica,
            load_balancers=load_balancers,
            commit=parts.commit,
            settings=settings,
        )
        return controller, settings.workers

    return Plan(build=build, worker=NAME + shard.suffix, needs_cluster_id=True, classes=classes)


SPEC = ControllerSpec(name=NAME, add_flags=add_flags, prepare=prepare)
