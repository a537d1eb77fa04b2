"""`pyccm sim kube`: argument parsing only; the server is imported when the command runs.

    pyccm sim kube --port 0 --kubeconfig-out run/kubeconfig --seed-nodes 5 --seed-services 2

prints exactly one line when it is listening,
`pyccm sim kube: ready at http://127.0.0.1:PORT (kubeconfig: PATH)`, and exits 0 on
SIGTERM or SIGINT. A bad flag or unreadable file is a one-line error and exit code 2.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from pyccm.logs import add_log_format_flag, configure

_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "kube",
        help="a Kubernetes API simulator (nodes, services, leases, events)",
        description="Serve enough of the Kubernetes API for kubectl, the kubernetes client "
        "and pyccm, on loopback, with fault knobs (admin endpoint under /_sim/).",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    parser.add_argument("--port", type=int, default=0, help="port; 0 picks a free one (default)")
    parser.add_argument(
        "--kubeconfig-out", type=Path, help="write a kubeconfig for the admin user here"
    )
    parser.add_argument("--token", default="pyccm-sim-admin", help="the admin bearer token")
    parser.add_argument(
        "--token-file", type=Path, help='static token file: token,user,uid,"group1,group2"'
    )
    parser.add_argument(
        "--rbac",
        type=Path,
        nargs="*",
        default=None,
        metavar="FILE",
        help="enforce RBAC, from the ClusterRoles, Roles and bindings stored: those in the "
        "FILEs (created at start) and any written through the API since",
    )
    parser.add_argument(
        "--seed-nodes", type=int, default=0, metavar="N", help="uninitialized nodes to create"
    )
    parser.add_argument(
        "--seed-services", type=int, default=0, metavar="M", help="LoadBalancer Services to create"
    )
    parser.add_argument(
        "--seed-cluster-ip-services",
        type=int,
        default=0,
        metavar="K",
        help="ClusterIP Services to create after the LoadBalancer ones",
    )
    parser.add_argument(
        "--history-size", type=int, default=20_000, help="changes kept for watch resumption"
    )
    parser.add_argument(
        "--bookmark-interval", type=float, default=60.0, help="seconds between watch bookmarks"
    )
    parser.add_argument(
        "--latency", type=float, default=0.0, help="seconds added to every API request"
    )
    parser.add_argument(
        "--error-rate",
        action="append",
        default=[],
        metavar="VERB=P",
        help="fail this fraction of requests with VERB with 500 (repeatable)",
    )
    parser.add_argument(
        "--throttle-rate", type=float, default=0.0, help="fraction of requests refused with 429"
    )
    parser.add_argument("--retry-after", type=int, default=1, help="Retry-After seconds on 429")
    parser.add_argument(
        "--random-seed", type=int, default=0, help="seed for uids, names and fault dice"
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        help="serve HTTPS with a self-signed certificate written into the kubeconfig "
        "(kubectl sends bearer tokens only over TLS)",
    )
    add_log_format_flag(parser)
    parser.set_defaults(run=run)


def _error_rates(pairs: list[str]) -> dict[str, float]:
    rates = {}
    for pair in pairs:
        verb, _, rate = pair.partition("=")
        if verb not in _VERBS:
            raise ValueError(f"--error-rate: unknown verb {verb!r} (one of {', '.join(_VERBS)})")
        rates[verb] = float(rate)
    return rates


def run(args: argparse.Namespace) -> int:
    import asyncio

    from pyccm_sim.kube.auth import BadRbacFile, parse_token_file
    from pyccm_sim.kube.runtime import serve_until_signalled
    from pyccm_sim.kube.settings import Faults, SimSettings

    # Warnings and errors only, as before: the simulator logs no access lines.
    configure(process="sim-kube", log_format=args.log_format, level=logging.WARNING)
    try:
        tokens = parse_token_file(args.token_file.read_text()) if args.token_file else []
        for path in args.rbac or ():
            path.read_text()
        faults = Faults(
            latency=args.latency,
            error_rates=_error_rates(args.error_rate),
            throttle_rate=args.throttle_rate,
            retry_after=args.retry_after,
        )
    except (OSError, ValueError) as error:
        print(f"pyccm sim kube: {error}", file=sys.stderr)
        return 2
    settings = SimSettings(
        host=args.host,
        port=args.port,
        admin_token=args.token,
        tokens=tuple(tokens),
        rbac=args.rbac is not None,
        rbac_files=tuple(args.rbac or ()),
        history_size=args.history_size,
        bookmark_interval=args.bookmark_interval,
        seed_nodes=args.seed_nodes,
        seed_services=args.seed_services,
        seed_cluster_ip_services=args.seed_cluster_ip_services,
        random_seed=args.random_seed,
        kubeconfig_out=args.kubeconfig_out,
        tls=args.tls,
    )
    try:
        return asyncio.run(serve_until_signalled(settings, faults=faults))
    except BadRbacFile as error:  # one line, no traceback
        print(f"pyccm sim kube: {error}", file=sys.stderr)
        return 2
