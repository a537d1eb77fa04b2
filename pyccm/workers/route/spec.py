"""The route controller to the worker process (runtime/spec.py).

Its flags can turn it off: `--configure-cloud-routes=false`, or a `--cluster-cidr` that is
empty or invalid. Such a worker is disabled, not fatal (the operator guide's promise, where upstream
exits the whole process), and needs no cluster id: it claims nothing on the router.
"""

from __future__ import annotations

import argparse

from pyccm.flags.durations import duration_flag
from pyccm.provider.errors import ConfigError
from pyccm.workers.route.cidrs import parse_cluster_cidrs
from pyccm.workers.runtime.controller import Controller
from pyccm.workers.runtime.spec import ControllerSpec, Flags, Parts, Plan, disabled, require

NAME = "route"


def add_flags(flags: Flags) -> None:
    flags.add_argument(
        "--cluster-cidr", default="", help="pod CIDR(s), comma-separated, one per IP family"
    )
    flags.add_argument(
        "--configure-cloud-routes",
        default="true",
        choices=("true", "false"),
        help="program the nodes' pod CIDRs as routes on the router (default true)",
    )
    flags.add_argument(
        "--route-reconciliation-period",
        type=duration_flag,
        default=10.0,
        help="full reconcile this often, besides node changes (default 10s)",
    )


def prepare(args: argparse.Namespace) -> Plan:
    if args.configure_cloud_routes != "true":
        return Plan(build=disabled("--configure-cloud-routes=false"), worker=NAME)
    try:
        cidrs = parse_cluster_cidrs(args.cluster_cidr)
    except ConfigError as error:
        return Plan(build=disabled(str(error)), worker=NAME)

    def build(parts: Parts) -> tuple[Controller, int]:
        from pyccm.workers.route.controller import RouteController, RouteSettings

        routes = require(parts.cloud.routes(), cloud=parts.cloud, what="routes")
        settings = RouteSettings(
            cluster_cidrs=cidrs, reconciliation_period=args.route_reconciliation_period
        )
        return RouteController(replica=parts.replica, routes=routes, settings=settings), 1

    return Plan(build=build, worker=NAME, needs_cluster_id=True)


SPEC = ControllerSpec(name=NAME, add_flags=add_flags, prepare=prepare)
