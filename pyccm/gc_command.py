"""`pyccm gc`: the cloud resources this cluster owns that no live Service accounts for
(kubernetes/cloud-provider-openstack#3145), listed, and deleted only when asked.

Only what carries this cluster's id is ever listed (`LoadBalancers.owned`), and a deletion
reads each resource again and checks the id before it writes: a resource of another
cluster, or one nobody tagged, is never touched. Without a Kubernetes API (the cluster is
gone) `--cluster-id` says whose resources to look for, and all of them are orphans.

Routes carry no tags: a router carries the cluster's claim of each of its CIDRs
(`pyccm-routes:<id>=<cidr>`, written by the route worker), and a route is the cluster's
when it lies in one of its claims on that router (`RouteOwnership`). While the cluster
lives, the routes no live Node accounts for (next hop and podCIDR both gone) are orphans;
once it is gone, all of them, and the claims themselves go once no route of the cluster is
left. A route another cluster's claim also covers is never listed, let alone deleted.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from pyccm.logs import add_log_format_flag

if TYPE_CHECKING:
    from pyccm.provider.interface import (
        ClaimedRouter,
        Cloud,
        LoadBalancers,
        OwnedResource,
        OwnedRoute,
        RouteOwnership,
    )
    from pyccm.workers.route.orphans import LiveNodes
    from pyccm.workers.service.orphans import Live

EPILOG = """\
examples:
  # what would be deleted (the default is a dry run), read from the cluster in ~/.kube/config
  pyccm gc --kubeconfig ~/.kube/config --cloud-config /etc/kubernetes/cloud.conf

  # delete it; exits 1 if anything could not be deleted, saying why
  pyccm gc --kubeconfig ~/.kube/config --cloud-config cloud.conf --yes

  # after the cluster is gone: everything tagged with its id is an orphan, including
  # its routes on every router that carries its claim (the claims go with the last route)
  pyccm gc --cluster-id 5a0e7c3e-0d6e-4c8e-9a57-2f4b8d1c9e10 --cloud-config cloud.conf

  # as JSON, for scripts
  pyccm gc --kubeconfig ~/.kube/config --cloud-config cloud.conf --output json

exit codes: 0 done (or nothing to do), 1 something could not be deleted, 2 bad flags or config
"""

COLUMNS = ("KIND", "ID", "NAME", "SERVICES", "DETAIL", "RESULT")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from pyccm.workers.runtime.identity import add_cloud_flags, add_cluster_id_flag

    parser = commands.add_parser(
        "gc",
        help="list (and with --yes delete) cloud resources this cluster owns that no "
        "Service accounts for",
        description="Lists every load balancer, listener on a shared load balancer, floating "
        "IP and security group that carries this cluster's id and that no live Service "
        "accounts for, and every route inside a CIDR this cluster claims on a router "
        "(its pyccm-routes tag) that no live Node accounts for. A dry run unless --yes.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--kubeconfig",
        default="",
        help="the cluster's kubeconfig (default: in-cluster when run in a pod; with neither, "
        "the cluster is taken as gone and --cluster-id is required)",
    )
    add_cluster_id_flag(parser)
    add_cloud_flags(parser)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--dry-run",
        action="store_true",
        default=True,
        help="only list the orphans (the default)",
    )
    mode.add_argument("--yes", action="store_true", help="delete the orphans")
    parser.add_argument(
        "--output",
        choices=("table", "json"),
        default="table",
        help="a table for people or JSON for scripts (default %(default)s)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds to wait for busy load balancers while deleting (default %(default)s)",
    )
    add_log_format_flag(parser)
    parser.set_defaults(run=run)


@dataclass
class Row:
    kind: str
    id: str
    name: str
    services: tuple[str, ...]
    detail: str
    result: str = "orphan"
    error: str = ""


def run(args: argparse.Namespace) -> int:
    from pyccm.kubeapi.errors import KubeConfigError, KubeError
    from pyccm.logs import configure
    from pyccm.provider.errors import ConfigError, ProviderError

    configure(process="gc", log_format=args.log_format)
    try:
        return _run(args, out=sys.stdout)
    except (ConfigError, KubeConfigError) as error:
        print(f"pyccm gc: {error}", file=sys.stderr)
        return 2
    except (ProviderError, KubeError) as error:
        print(f"pyccm gc: {error}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace, *, out: TextIO) -> int:
    from pyccm.provider.errors import ConfigError
    from pyccm.workers.runtime.identity import can_reach_kubernetes, resolve_cluster_id
    from pyccm.workers.runtime.oneshot import load_balancers
    from pyccm.workers.service.orphans import GONE, orphans

    if not can_reach_kubernetes(args.kubeconfig) and not args.cluster_id:
        raise ConfigError("no Kubernetes API to read the live Services from: give --cluster-id")
    cluster_id = resolve_cluster_id(
        given=args.cluster_id, kubeconfig=args.kubeconfig, required=True
    )
    from pyccm.workers.route.orphans import NODES_GONE

    live, live_nodes = _live(args) if can_reach_kubernetes(args.kubeconfig) else (GONE, NODES_GONE)
    cloud, lbs = load_balancers(args, cluster_id=cluster_id)
    try:
        found = orphans(lbs.owned(), live)
        rows = [Row(r.kind, r.id, r.name, r.services, r.detail) for r in found]
        if args.yes:
            deadline = time.monotonic() + args.timeout
            for resource, row in zip(found, rows, strict=True):
                _delete(lbs, resource, row, deadline=deadline)
        rows += _routes(cloud, live_nodes, yes=args.yes)
    finally:
        cloud.close()
    _print(rows, args=args, cluster_id=cluster_id, gone=live is GONE, out=out)
    return 1 if any(row.result == "failed" for row in rows) else 0


def _live(args: argparse.Namespace) -> tuple[Live, LiveNodes]:
    from pyccm.kubeapi.client import KubeClient, KubeSettings
    from pyccm.workers.route.orphans import LiveNodes
    from pyccm.workers.runtime.oneshot import nodes, services
    from pyccm.workers.service.orphans import Live

    client = KubeClient(settings=KubeSettings(kubeconfig=args.kubeconfig))
    try:
        return Live.of(services(client)), LiveNodes.of(nodes(client))
    finally:
        client.close()


def _routes(cloud: Cloud, live: LiveNodes, *, yes: bool) -> list[Row]:
    """The orphaned routes (and, the cluster gone, the routers' claims), deleted with `yes`:
    one removal per router, then each claim with no route of the cluster left."""
    from pyccm.provider.interface import RouteOwningCloud

    ownership = cloud.route_ownership() if isinstance(cloud, RouteOwningCloud) else None
    if ownership is None:
        return []
    routers = ownership.claimed_routers()
    rows: list[Row] = []
    for router in routers:
        rows += _router_routes(ownership, router, live, yes=yes)
    if live.gone:
        rows += [_release(ownership, router, yes=yes) for router in routers]
    return rows


def _router_routes(
    ownership: RouteOwnership, router: ClaimedRouter, live: LiveNodes, *, yes: bool
) -> list[Row]:
    from pyccm.workers.route.orphans import route_orphans

    found = route_orphans([router], live)
    rows = {
        (r.destination, r.nexthop): Row(
            "route", r.destination, r.nexthop, (), f"router {router.name or router.id}"
        )
        for r in found
    }
    if yes and found:
        failed = _route_failures(ownership, router.id, found)
        for route, row in ((r, rows[(r.destination, r.nexthop)]) for r in found):
            error = failed.get((route.destination, route.nexthop))
            row.result, row.error = ("failed", error) if error else ("deleted", "")
    return list(rows.values())


def _route_failures(
    ownership: RouteOwnership, router_id: str, routes: Sequence[OwnedRoute]
) -> dict[tuple[str, str], str]:
    from pyccm.provider.errors import ProviderError

    try:
        failures = ownership.delete_routes(router_id, routes)
    except ProviderError as error:
        return {(r.destination, r.nexthop): str(error) for r in routes}
    return {(f.route.destination, f.route.nexthop): f.error for f in failures}


def _release(ownership: RouteOwnership, router: ClaimedRouter, *, yes: bool) -> Row:
    """The router's claims of the gone cluster: removed once no route of it is left."""
    from pyccm.provider.errors import ProviderError

    row = Row("router tag", router.id, router.name, (), "claims " + ", ".join(router.cidrs))
    if yes:
        try:
            ownership.release(router.id)
        except ProviderError as error:
            row.result, row.error = "failed", str(error)
        else:
            row.result = "deleted"
    return row


def _delete(lbs: LoadBalancers, resource: OwnedResource, row: Row, *, deadline: float) -> None:
    """Calls `delete_owned` until it is done (a load balancer busy with the previous write
    answers `RetryAfter`), or the deadline passes."""
    from pyccm.provider.errors import ProviderError, RetryAfter

    while True:
        try:
            lbs.delete_owned(resource)
        except RetryAfter as later:
            if time.monotonic() + later.delay > deadline:
                row.result, row.error = "failed", f"timed out: {later}"
                return
            time.sleep(later.delay)
            continue
        except ProviderError as error:
            row.result, row.error = "failed", str(error)
            return
        row.result = "deleted"
        return


def _print(
    rows: Sequence[Row], *, args: argparse.Namespace, cluster_id: str, gone: bool, out: TextIO
) -> None:
    if args.output == "json":
        document = {
            "cluster_id": cluster_id,
            "cluster_gone": gone,
            "dry_run": not args.yes,
            "orphans": [
                {
                    "kind": r.kind,
                    "id": r.id,
                    "name": r.name,
                    "services": list(r.services),
                    "detail": r.detail,
                    "result": r.result,
                    **({"error": r.error} if r.error else {}),
                }
                for r in rows
            ],
        }
        print(json.dumps(document, indent=2), file=out)
        return
    where = (
        "the cluster is gone: everything it owns"
        if gone
        else "no live Service or Node accounts for"
    )
    print(f"cluster {cluster_id}: {len(rows)} orphaned resource(s) ({where})", file=out)
    if rows:
        table = [COLUMNS] + [
            (r.kind, r.id, r.name, ",".join(r.services) or "-", r.detail or "-", r.result)
            for r in rows
        ]
        widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
        for line in table:
            print(
                "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip(), file=out
            )
    for r in rows:
        if r.error:
            print(f"could not delete {r.kind} {r.id}: {r.error}", file=out)
    if rows and not args.yes:
        print("dry run: nothing was deleted (run again with --yes to delete)", file=out)
