"""`pyccm manager`: the parent process. Flags follow upstream's where they mean the same."""

from __future__ import annotations

import argparse

from pyccm.logs import add_log_format_flag, configure
from pyccm.protocol.addresses import (
    add_advertise_flag,
    add_bus_flags,
    advertise,
    resolve,
    server_curve,
)
from pyccm.protocol.controllers import parse_controllers


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "manager",
        help="the parent process: leader election, the one watch, the bus, the writer",
        description="Hold the leader Lease, watch Nodes and Services, fan changes out to the "
        "controller workers over the bus, and apply their results to the API.",
    )
    parser.add_argument(
        "--kubeconfig", default="", help="kubeconfig path (default: in-cluster config)"
    )
    parser.add_argument(
        "--controllers",
        default="*",
        help="controllers whose workers to expect (default %(default)s)",
    )
    parser.add_argument(
        "--service-shards", type=int, default=1, help="service worker processes (default 1)"
    )
    parser.add_argument(
        "--kube-api-qps",
        type=float,
        default=20.0,
        help="requests per second to the API server (default %(default)s, upstream's)",
    )
    parser.add_argument(
        "--kube-api-burst",
        type=int,
        default=30,
        help="requests allowed at once above --kube-api-qps (default %(default)s)",
    )
    parser.add_argument(
        "--leader-elect",
        default="true",
        choices=("true", "false"),
        help="hold the Lease before working, so that only one replica works (default true)",
    )
    parser.add_argument(
        "--leader-elect-lease-duration",
        type=float,
        default=15.0,
        help="seconds a standby waits after the last renewal before it takes the Lease "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--leader-elect-renew-deadline",
        type=float,
        default=10.0,
        help="seconds the leader keeps trying to renew before it gives up and exits "
        "(default %(default)s; less than the lease duration)",
    )
    parser.add_argument(
        "--leader-elect-retry-period",
        type=float,
        default=2.0,
        help="seconds between attempts to acquire or renew the Lease (default %(default)s)",
    )
    parser.add_argument(
        "--leader-elect-resource-name",
        default="cloud-controller-manager",
        help="name of the Lease (default %(default)s)",
    )
    parser.add_argument(
        "--leader-elect-resource-namespace",
        default="kube-system",
        help="namespace of the Lease (default %(default)s)",
    )
    parser.add_argument(
        "--bind-address",
        default="127.0.0.1",
        help="address --secure-port listens on (default %(default)s)",
    )
    parser.add_argument(
        "--secure-port",
        type=int,
        default=10258,
        help="HTTP port for /healthz, /readyz, /metrics (0: off)",
    )
    add_bus_flags(parser)
    add_advertise_flag(parser)
    add_log_format_flag(parser)
    parser.set_defaults(run=run)


def expected_workers(controllers: tuple[str, ...], shards: int) -> tuple[str, ...]:
    names: list[str] = []
    for name in controllers:
        if name == "service" and shards > 1:
            names += [f"service-{index}" for index in range(shards)]
        else:
            names.append(name)
    return tuple(names)


def run(args: argparse.Namespace) -> int:
    from pyccm.kubeapi.client import KubeSettings
    from pyccm.manager.app import Manager, ManagerSettings
    from pyccm.manager.bus import BusSettings
    from pyccm.manager.election import ElectionSettings

    configure(process="manager", log_format=args.log_format)
    try:
        controllers = parse_controllers(args.controllers)
        election = ElectionSettings(
            namespace=args.leader_elect_resource_namespace,
            name=args.leader_elect_resource_name,
            lease_duration=args.leader_elect_lease_duration,
            renew_deadline=args.leader_elect_renew_deadline,
            retry_period=args.leader_elect_retry_period,
        )
        election.validate()
    except ValueError as error:
        print(f"pyccm manager: {error}")
        return 2
    pub, router = resolve(args)
    settings = ManagerSettings(
        kube=KubeSettings(
            kubeconfig=args.kubeconfig, qps=args.kube_api_qps, burst=args.kube_api_burst
        ),
        bus=BusSettings(
            pub_address=pub,
            router_address=router,
            curve=server_curve(args),
            advertise=advertise(args, pub, router),
        ),
        election=election,
        leader_elect=args.leader_elect == "true",
        bind_address=args.bind_address,
        port=args.secure_port,
        expected_workers=expected_workers(controllers, args.service_shards),
    )
    return Manager(settings=settings).run()
