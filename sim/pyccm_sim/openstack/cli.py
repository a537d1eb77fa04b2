"""`pyccm sim openstack`: argument parsing only; the server is imported when the command runs.

Prints exactly one line once the simulator listens (and its configs are written):
`pyccm sim openstack: ready at http://HOST:PORT (config: DIR)`, so a parent process can
wait for it; SIGTERM or SIGINT stop it cleanly with exit code 0.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pyccm.logs import add_log_format_flag
from pyccm_sim.openstack.settings import DEFAULT_MAX_REQUEST_BODY_SIZE

READY_PREFIX = "pyccm sim openstack: ready at "


def _index_set(text: str) -> frozenset[int]:
    """`"1,3,5-7"` → {1, 3, 5, 6, 7}."""
    result: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        low, _, high = part.partition("-")
        result.update(range(int(low), int(high or low) + 1))
    return frozenset(result)


def _error_rate(text: str) -> tuple[str, int, float]:
    """`"load-balancer:503:0.1"` → ("load-balancer", 503, 0.1)."""
    service, status, rate = text.rsplit(":", 2)
    return service, int(status), float(rate)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "openstack",
        help="an OpenStack (Keystone/Nova/Neutron/Octavia) simulator",
        description="Serve Keystone, Nova, Neutron and Octavia on loopback for openstacksdk, the "
        "openstack CLI and pyccm; optionally seeded with one server per node of sim.scenario.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback)")
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one")
    parser.add_argument("--region", default="RegionOne", help="catalog region (default: RegionOne)")
    parser.add_argument(
        "--seed-nodes", type=int, default=0, metavar="N", help="servers node-0000..N-1"
    )
    parser.add_argument(
        "--seed-shutoff",
        type=_index_set,
        default=frozenset(),
        metavar="LIST",
        help="node indexes whose servers are SHUTOFF, e.g. 1,4-6",
    )
    parser.add_argument(
        "--seed-deleted",
        type=_index_set,
        default=frozenset(),
        metavar="LIST",
        help="node indexes that have no server (deleted VMs)",
    )
    parser.add_argument(
        "--seed-floating-ips",
        type=_index_set,
        default=frozenset(),
        metavar="LIST",
        help="node indexes whose port gets a floating IP",
    )
    parser.add_argument(
        "--zones", default="nova", help="comma list of availability zones, round-robin"
    )
    parser.add_argument(
        "--write-config",
        type=Path,
        metavar="DIR",
        help="write clouds.yaml, cloud.conf and openstack-sim.json into DIR",
    )
    parser.add_argument("--random-seed", type=int, default=0, help="seed for ids and random faults")
    parser.add_argument(
        "--token-ttl",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="lifetime of the Keystone tokens it issues (default 3600)",
    )
    knobs = parser.add_argument_group(
        "fault knobs (also settable at run time via PATCH /_sim/knobs)"
    )
    knobs.add_argument(
        "--latency-ms", type=float, default=0.0, help="milliseconds added to every answer"
    )
    knobs.add_argument(
        "--latency-jitter-ms",
        type=float,
        default=0.0,
        help="up to this many milliseconds more, at random",
    )
    knobs.add_argument(
        "--error-rate",
        type=_error_rate,
        action="append",
        default=[],
        metavar="SERVICE:STATUS:RATE",
        help="e.g. load-balancer:503:0.05 (repeatable)",
    )
    knobs.add_argument(
        "--retry-after",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="Retry-After sent with injected 429/503 answers",
    )
    knobs.add_argument(
        "--provisioning-delay",
        type=float,
        default=0.05,
        metavar="SECONDS",
        help="how long Octavia objects stay PENDING_* (default 0.05)",
    )
    knobs.add_argument("--octavia-version", default="2.27", help="top of the Octavia version list")
    knobs.add_argument("--nova-microversion", default="2.1", help="Nova's maximum microversion")
    knobs.add_argument(
        "--lb-quota",
        type=int,
        default=None,
        metavar="N",
        help="load balancers a project may have (Octavia's quota; default unlimited)",
    )
    knobs.add_argument(
        "--force-error-lbs",
        type=int,
        default=0,
        metavar="N",
        help="the next N load balancers end in ERROR",
    )
    knobs.add_argument(
        "--no-batch-members", action="store_true", help="answer 405 to PUT /pools/{id}/members"
    )
    knobs.add_argument(
        "--disable-extension",
        action="append",
        default=[],
        metavar="ALIAS",
        help="hide a Neutron extension, e.g. extraroute-atomic (repeatable)",
    )
    knobs.add_argument(
        "--max-routes",
        type=int,
        default=None,
        metavar="N",
        help="routes per router, answered as Neutron 29's router_route quota (409 OverQuota; "
        "real default 30; unlimited here)",
    )
    knobs.add_argument(
        "--max-request-body-size",
        type=int,
        default=DEFAULT_MAX_REQUEST_BODY_SIZE,
        metavar="BYTES",
        help="Octavia's and Nova's [oslo_middleware] max_request_body_size: larger bodies get "
        f"413 (default {DEFAULT_MAX_REQUEST_BODY_SIZE}, the services' own; 0 = no limit)",
    )
    for service in ("octavia", "nova"):
        knobs.add_argument(
            f"--{service}-page-limit",
            type=int,
            default=1000,
            metavar="N",
            help=f"most rows in one {service.capitalize()} list answer (default 1000; 0 = no cap)",
        )
    parser.add_argument("-v", "--verbose", action="store_true", help="log every request")
    add_log_format_flag(parser)
    parser.set_defaults(run=run)


def knob_values(args: argparse.Namespace) -> dict[str, Any]:
    rates: dict[str, dict[int, float]] = {}
    for service, status, rate in args.error_rate:
        rates.setdefault(service, {})[status] = rate
    return {
        "latency_ms": args.latency_ms,
        "latency_jitter_ms": args.latency_jitter_ms,
        "error_rates": rates,
        "retry_after_s": args.retry_after,
        "provisioning_delay_s": args.provisioning_delay,
        "octavia_version": args.octavia_version,
        "nova_max_microversion": args.nova_microversion,
        "lb_quota": args.lb_quota,
        "force_error_next_lbs": args.force_error_lbs,
        "batch_members": not args.no_batch_members,
        "disabled_extensions": set(args.disable_extension),
        "max_routes": args.max_routes,
        "octavia_page_limit": args.octavia_page_limit,
        "nova_page_limit": args.nova_page_limit,
        "max_request_body_size": args.max_request_body_size,
    }


def run(args: argparse.Namespace) -> int:
    from pyccm_sim.openstack.main import main

    return main(args)
