"""`pyccm manager`: the parent process. Flags follow upstream's where they mean the same."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from pyccm.flags.addresses import (
    add_advertise_flag,
    add_bus_flags,
    advertise,
    resolve,
    server_curve,
)
from pyccm.flags.cluster_id import add_cluster_id_flag
from pyccm.flags.durations import duration_flag
from pyccm.flags.load_balancer_class import (
    add_load_balancer_class_flags,
    load_balancer_classes,
)
from pyccm.logs import add_log_format_flag, configure
from pyccm.protocol.controllers import parse_controllers

if TYPE_CHECKING:
    # Imported where used: they load the API client and cryptography, which every other
    # `pyccm` command (a worker, say) would otherwise carry (docs/architecture.md#lean-imports).
    from pyccm.manager.access import AccessSettings
    from pyccm.manager.serving import ServingSettings


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
    add_load_balancer_class_flags(parser)
    add_cluster_id_flag(parser)
    add_serving_flags(parser)
    add_bus_flags(parser)
    add_advertise_flag(parser)
    add_log_format_flag(parser)
    parser.set_defaults(run=run)


def add_serving_flags(parser: argparse.ArgumentParser) -> None:
    """Upstream's secure serving, delegated authentication and authorization flags."""
    group = parser.add_argument_group(
        "secure serving (HTTPS for /healthz, /livez, /readyz, /metrics)"
    )
    group.add_argument(
        "--bind-address",
        default="127.0.0.1",
        help="address of the secure port (default %(default)s; upstream's is 0.0.0.0)",
    )
    group.add_argument(
        "--secure-port",
        type=int,
        default=10258,
        help="HTTPS port for /healthz, /livez, /readyz, /metrics (default %(default)s; 0: off)",
    )
    group.add_argument(
        "--tls-cert-file", default="", help="serving certificate (PEM; with its chain)"
    )
    group.add_argument(
        "--tls-private-key-file", default="", help="the key of --tls-cert-file (PEM)"
    )
    group.add_argument(
        "--cert-dir",
        default="",
        help="without --tls-cert-file: where the self-signed pair cloud-controller-manager.crt/"
        ".key is kept (reused if present, else generated); empty: generated in memory",
    )
    group.add_argument(
        "--tls-min-version",
        default="",
        help="VersionTLS10 .. VersionTLS13 (default: TLS 1.2)",
    )
    group.add_argument(
        "--tls-cipher-suites",
        type=_names,
        default=(),
        help="comma-separated TLS 1.2 suites by Go's names (default: OpenSSL's)",
    )
    group.add_argument(
        "--tls-curve-preferences",
        type=_names,
        default=(),
        help="comma-separated numeric Go crypto/tls CurveID values the server allows for key "
        "exchange: 23 (P-256), 24 (P-384), 25 (P-521), 29 (X25519); one of them with "
        "Python 3.11's ssl module (default: OpenSSL's)",
    )
    group.add_argument(
        "--client-ca-file",
        default="",
        help="CA of client certificates to accept (user: CN, groups: O); empty: tokens only",
    )
    group.add_argument(
        "--authentication-token-webhook-cache-ttl",
        type=duration_flag,
        default=10.0,
        help="how long a TokenReview's answer is kept (default 10s)",
    )
    group.add_argument(
        "--authorization-webhook-cache-authorized-ttl",
        type=duration_flag,
        default=10.0,
        help="how long an 'allowed' SubjectAccessReview is kept (default 10s)",
    )
    group.add_argument(
        "--authorization-webhook-cache-unauthorized-ttl",
        type=duration_flag,
        default=10.0,
        help="how long a 'denied' SubjectAccessReview is kept (default 10s)",
    )
    group.add_argument(
        "--authorization-always-allow-paths",
        type=_names,
        default=("/healthz", "/readyz", "/livez"),
        help="paths served without any credentials; a trailing * matches a prefix "
        "(default /healthz,/readyz,/livez)",
    )


def _names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(",") if name.strip())


def serving_settings(args: argparse.Namespace) -> tuple[ServingSettings, AccessSettings]:
    """The serving and access settings from the flags; ValueError names a bad flag."""
    from pyccm.manager.access import AccessSettings
    from pyccm.manager.serving import ServingSettings

    serving = ServingSettings(
        bind_address=args.bind_address,
        port=args.secure_port,
        cert_file=args.tls_cert_file,
        key_file=args.tls_private_key_file,
        cert_dir=args.cert_dir,
        min_tls_version=args.tls_min_version,
        cipher_suites=args.tls_cipher_suites,
        client_ca_file=args.client_ca_file,
        curve_preferences=args.tls_curve_preferences,
    )
    access = AccessSettings(
        always_allow_paths=args.authorization_always_allow_paths,
        token_ttl=args.authentication_token_webhook_cache_ttl,
        authorized_ttl=args.authorization_webhook_cache_authorized_ttl,
        unauthorized_ttl=args.authorization_webhook_cache_unauthorized_ttl,
    )
    serving.validate()
    access.validate()
    return serving, access


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
        if not (args.kube_api_qps > 0 and args.kube_api_burst >= 1):
            raise ValueError("--kube-api-qps must be above 0 and --kube-api-burst at least 1")
        serving, access = serving_settings(args)
        classes = load_balancer_classes(args)
    except ValueError as error:
        print(f"pyccm manager: {error}", file=sys.stderr)
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
        serving=serving,
        access=access,
        expected_workers=expected_workers(controllers, args.service_shards),
        load_balancer_classes=classes,
        cluster_id=args.cluster_id,
    )
    try:
        manager = Manager(settings=settings)
    except ValueError as error:  # a kubeconfig, a serving certificate or key, unusable
        print(f"pyccm manager: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # the secure port is taken, or the address is not ours
        print(
            f"pyccm manager: cannot serve on {args.bind_address}:{args.secure_port}: {error}",
            file=sys.stderr,
        )
        return 1
    return manager.run()
