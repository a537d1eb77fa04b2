"""`pyccm gc`: the cloud resources this cluster owns that no live Service accounts for
(upstream #3145), listed, and deleted only when asked.

Only what carries this cluster's id is ever listed (`LoadBalancers.owned`), and a deletion
reads each resource again and checks the id before it writes: a resource of another
cluster, or one nobody tagged, is never touched. Without a Kubernetes API (the cluster is
gone) `--cluster-id` says whose resources to look for, and all of them are orphans.
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
    from pyccm.provider.interface import LoadBalancers, OwnedResource
    from pyccm.workers.service.orphans import Live

EPILOG = """\
examples:
  # what would be deleted (the default is a dry run), read from the cluster in ~/.kube/config
  pyccm gc --kubeconfig ~/.kube/config --cloud-config /etc/kubernetes/cloud.conf

  # delete it; exits 1 if anything could not be deleted, saying why
  pyccm gc --kubeconfig ~/.kube/config --cloud-config cloud.conf --yes

  # after the cluster is gone: everything tagged with its id is an orphan
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
        "accounts for. A dry run unless --yes.",
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
    from pyccm.kubeapi.errors import KubeError
    from pyccm.logs import configure
    from pyccm.provider.errors import ConfigError, ProviderError

    configure(process="gc", log_format=args.log_format)
    try:
        return _run(args, out=sys.stdout)
    except ConfigError as error:
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
    live = _live(args) if can_reach_kubernetes(args.kubeconfig) else GONE
    cloud, lbs = load_balancers(args, cluster_id=cluster_id)
    try:
        found = orphans(lbs.owned(), live)
        rows = [Row(r.kind, r.id, r.name, r.services, r.detail) for r in found]
        if args.yes:
            deadline = time.monotonic() + args.timeout
            for resource, row in zip(found, rows, strict=True):
                _delete(lbs, resource, row, deadline=deadline)
    finally:
        cloud.close()
    _print(rows, args=args, cluster_id=cluster_id, gone=live is GONE, out=out)
    return 1 if any(row.result == "failed" for row in rows) else 0


def _live(args: argparse.Namespace) -> Live:
    from pyccm.kubeapi.client import KubeClient, KubeSettings
    from pyccm.workers.runtime.oneshot import services
    from pyccm.workers.service.orphans import Live

    client = KubeClient(settings=KubeSettings(kubeconfig=args.kubeconfig))
    try:
        return Live.of(services(client))
    finally:
        client.close()


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
    where = "the cluster is gone: everything it owns" if gone else "no live Service accounts for"
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
