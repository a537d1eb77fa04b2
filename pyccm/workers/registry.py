"""Every controller a worker process can run, by canonical name: its spec (runtime/spec.py).

The service controller's spec is written here rather than in `workers/service/spec.py`
beside the others: that package is being reworked, and the spec only uses what it offers
today (`Shard`, `ServiceSettings`, `ServiceController`).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from pyccm.protocol.durations import duration_flag
from pyccm.protocol.load_balancer_class import (
    add_load_balancer_class_flags,
    load_balancer_classes,
)
from pyccm.provider.errors import ConfigError
from pyccm.workers.lifecycle.spec import SPEC as LIFECYCLE
from pyccm.workers.node.spec import SPEC as NODE
from pyccm.workers.route.spec import SPEC as ROUTE
from pyccm.workers.runtime.controller import Controller
from pyccm.workers.runtime.spec import ControllerSpec, Flags, Parts, Plan, positive_int, require
from pyccm.workers.service.policy import Shard


def _service_flags(flags: Flags) -> None:
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


def _service_plan(args: argparse.Namespace) -> Plan:
    try:
        shard = Shard.parse(args.shard)
        classes = load_balancer_classes(args)
    except ValueError as error:
        raise ConfigError(str(error)) from None

    def build(parts: Parts) -> tuple[Controller, int]:
        from pyccm.workers.service.controller import ServiceController, ServiceSettings

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

    return Plan(
        build=build, worker="service" + shard.suffix, needs_cluster_id=True, classes=classes
    )


SERVICE = ControllerSpec(name="service", add_flags=_service_flags, prepare=_service_plan)

# One per controller the manager knows (protocol.controllers.CONTROLLERS), in its order.
SPECS: Mapping[str, ControllerSpec] = {s.name: s for s in (NODE, LIFECYCLE, SERVICE, ROUTE)}
