"""`pyccm worker NAME`: one controller process, on the bus or `--standalone`."""

from __future__ import annotations

import argparse

from pyccm.logs import add_log_format_flag
from pyccm.protocol.addresses import add_bus_flags
from pyccm.protocol.controllers import CONTROLLERS, WORKER_ALIASES
from pyccm.protocol.durations import duration_flag
from pyccm.protocol.load_balancer_class import add_load_balancer_class_flags
from pyccm.workers.runtime.identity import add_cluster_id_flag

DURATION = "seconds, or a duration such as 5s or 5m"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "worker",
        help="one controller process (node, lifecycle, service, route)",
        description="Run one controller. It receives Nodes/Services from the manager over the "
        "bus and sends back what to write; --standalone runs it alone with its own watch.",
    )
    names = sorted({*CONTROLLERS, *WORKER_ALIASES})
    parser.add_argument(
        "controller", choices=names, metavar="NAME", help=f"one of {', '.join(names)}"
    )
    parser.add_argument(
        "--cloud-provider", default="openstack", help="provider name (default %(default)s)"
    )
    parser.add_argument(
        "--cloud-config", default="", help="provider configuration file (cloud.conf)"
    )
    parser.add_argument(
        "--cluster-name",
        default="kubernetes",
        help="the cluster's name in the names of its cloud resources (default %(default)s)",
    )
    add_cluster_id_flag(parser)
    parser.add_argument(
        "--cloud-config-reload-period",
        type=duration_flag,
        default=10.0,
        help="re-read --cloud-config (and its clouds.yaml) this often and apply what changed, "
        "no restart needed (default 10s; 0: only on SIGHUP)",
    )
    parser.add_argument(
        "--cloud-api-qps",
        type=float,
        default=20.0,
        help="cloud API calls per second this process may make (default %(default)s)",
    )
    parser.add_argument(
        "--cloud-api-burst",
        type=int,
        default=40,
        help="cloud API calls allowed at once above --cloud-api-qps (default %(default)s)",
    )
    node = parser.add_argument_group("cloud-node and cloud-node-lifecycle")
    node.add_argument(
        "--concurrent-node-syncs",
        type=int,
        default=1,
        help="nodes initialized or updated at once (default %(default)s)",
    )
    node.add_argument(
        "--node-status-update-frequency", type=duration_flag, default=300.0, help=DURATION
    )
    node.add_argument("--node-monitor-period", type=duration_flag, default=5.0, help=DURATION)
    node.add_argument(
        "--concurrent-node-probes", type=int, default=20, help="lifecycle probes in flight"
    )
    service = parser.add_argument_group("service")
    service.add_argument(
        "--concurrent-service-syncs",
        type=int,
        default=10,
        help="Services synced at once (default %(default)s; upstream's is 1)",
    )
    service.add_argument(
        "--shard",
        default="0/1",
        help="i/n: own the Services whose key hashes to i mod n (default %(default)s)",
    )
    service.add_argument(
        "--lb-resync-period",
        type=duration_flag,
        default=600.0,
        help="re-ensure every LB Service this often; reads only unless drifted (default 10m)",
    )
    service.add_argument(
        "--orphan-scan-period",
        type=duration_flag,
        default=0.0,
        help="this often, warn (event on kube-system, pyccm_orphaned_resources) about cloud "
        "resources of this cluster no Service accounts for; 0 = off (default)",
    )
    add_load_balancer_class_flags(service)
    route = parser.add_argument_group("route")
    route.add_argument(
        "--cluster-cidr", default="", help="pod CIDR(s), comma-separated, one per IP family"
    )
    route.add_argument(
        "--configure-cloud-routes",
        default="true",
        choices=("true", "false"),
        help="program the nodes' pod CIDRs as routes on the router (default true)",
    )
    route.add_argument(
        "--route-reconciliation-period",
        type=duration_flag,
        default=10.0,
        help="full reconcile this often, besides node changes (default 10s)",
    )
    parser.add_argument(
        "--standalone", action="store_true", help="no manager: watch and write directly"
    )
    parser.add_argument("--kubeconfig", default="", help="with --standalone (default: in-cluster)")
    add_bus_flags(parser)
    add_log_format_flag(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pyccm.workers.app import main

    return main(args)
