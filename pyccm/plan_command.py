"""`pyccm plan service NAMESPACE/NAME`: what an ensure of that Service would do to the cloud
now, computed by the code the service worker runs (`LoadBalancers.plan`), writing nothing.

`--annotation KEY=VALUE` (or `KEY-` to remove one) plans the Service as it would be with
that change, so an operator sees what an annotation will do before making it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from pyccm.logs import add_log_format_flag

if TYPE_CHECKING:
    from pyccm.protocol.views import Service
    from pyccm.provider.interface import LoadBalancerPlan

EPILOG = """\
examples:
  # what the next sync of default/web would create, update or delete
  pyccm plan service default/web --kubeconfig ~/.kube/config --cloud-config cloud.conf

  # what turning on PROXY protocol would do, before annotating the Service
  pyccm plan service default/web --kubeconfig ~/.kube/config --cloud-config cloud.conf \\
      --annotation loadbalancer.openstack.org/proxy-protocol=true

  # as JSON (every field of every request that would be sent)
  pyccm plan service default/web --kubeconfig ~/.kube/config --cloud-config cloud.conf -o json

exit codes: 0 planned (with or without changes), 1 the Service or the cloud could not be
read or the ensure would fail (the error says why), 2 bad flags or config
"""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from pyccm.workers.runtime.identity import add_cloud_flags, add_cluster_id_flag

    parser = commands.add_parser(
        "plan",
        help="what an ensure of a Service would do to the cloud now (reads only)",
        description="Computes, with the service worker's own code, what ensuring a "
        "Service's load balancer would create, update (the differing fields) and delete, "
        "and prints it. Only reads the cloud.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("kind", choices=("service",), help="what to plan (only: service)")
    parser.add_argument("target", metavar="NAMESPACE/NAME", help="the Service")
    parser.add_argument(
        "--annotation",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="plan as if the Service had this annotation (KEY- removes one); repeatable",
    )
    parser.add_argument(
        "--kubeconfig", default="", help="the cluster's kubeconfig (default: in-cluster)"
    )
    add_cluster_id_flag(parser)
    add_cloud_flags(parser)
    parser.add_argument(
        "-o",
        "--output",
        choices=("table", "json"),
        default="table",
        help="a table for people or JSON for scripts (default %(default)s)",
    )
    add_log_format_flag(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pyccm.kubeapi.errors import KubeConfigError, KubeError
    from pyccm.logs import configure
    from pyccm.provider.errors import ConfigError, ProviderError

    configure(process="plan", log_format=args.log_format)
    try:
        plan = _plan(args)
    except (ConfigError, KubeConfigError) as error:
        print(f"pyccm plan: {error}", file=sys.stderr)
        return 2
    except (ProviderError, KubeError) as error:
        print(f"pyccm plan: {error}", file=sys.stderr)
        return 1
    _print(plan, output=args.output, out=sys.stdout)
    return 0


def _plan(args: argparse.Namespace) -> LoadBalancerPlan:
    import msgspec

    from pyccm.kubeapi.client import KubeClient, KubeSettings
    from pyccm.protocol.views import Service
    from pyccm.provider.errors import ConfigError
    from pyccm.workers.runtime.identity import resolve_cluster_id
    from pyccm.workers.runtime.oneshot import load_balancers, nodes
    from pyccm.workers.service.policy import is_backend

    namespace, _, name = args.target.partition("/")
    if not namespace or not name:
        raise ConfigError(f"{args.target!r}: expected NAMESPACE/NAME")
    changes = _annotations(args.annotation)
    cluster_id = resolve_cluster_id(
        given=args.cluster_id, kubeconfig=args.kubeconfig, required=True
    )
    client = KubeClient(settings=KubeSettings(kubeconfig=args.kubeconfig))
    try:
        body = client.request("GET", f"/api/v1/namespaces/{namespace}/services/{name}")
        service = _annotated(msgspec.json.decode(body, type=Service), changes)
        backends = [n for n in nodes(client) if is_backend(n)]
    finally:
        client.close()
    if service.spec.type != "LoadBalancer":
        raise ConfigError(f"Service {service.key} is of type {service.spec.type}, not LoadBalancer")
    cloud, lbs = load_balancers(args, cluster_id=cluster_id)
    try:
        return lbs.plan(service=service, nodes=backends)
    finally:
        cloud.close()


def _annotations(flags: list[str]) -> dict[str, str | None]:
    from pyccm.provider.errors import ConfigError

    changes: dict[str, str | None] = {}
    for flag in flags:
        key, sep, value = flag.partition("=")
        if sep and key:
            changes[key] = value
        elif not sep and flag.endswith("-") and len(flag) > 1:
            changes[flag[:-1]] = None
        else:
            raise ConfigError(f"--annotation {flag!r}: expected KEY=VALUE or KEY-")
    return changes


def _annotated(service: Service, changes: dict[str, str | None]) -> Service:
    import msgspec

    if not changes:
        return service
    merged = {**service.metadata.annotations}
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    meta = msgspec.structs.replace(service.metadata, annotations=merged)
    return msgspec.structs.replace(service, metadata=meta)


def _print(plan: LoadBalancerPlan, *, output: str, out: TextIO) -> None:
    import msgspec

    if output == "json":
        print(json.dumps(msgspec.to_builtins(plan), indent=2), file=out)
        return
    print(f"plan for Service {plan.service}: {len(plan.changes)} change(s)", file=out)
    for change in plan.changes:
        print(f"  {change.action:<6}  {change.kind}  {change.target}", file=out)
        for key, value in change.fields.items():
            print(f"            {key}: {_short(value)}", file=out)
    if not plan.changes and not plan.waits:
        print("  nothing: the cloud already matches the Service", file=out)
    if plan.waits:
        print(f"then an ensure stops for now: {plan.waits}", file=out)
    for event in plan.events:
        print(f"event {event.type} {event.reason}: {event.message}", file=out)
    for item in plan.ingress:
        print(f"ingress: {item.ip or item.hostname}", file=out)


def _short(value: Any) -> str:
    """A field's value on one line: lists of scalars in full (up to 10), bigger ones counted."""
    if isinstance(value, list):
        if all(not isinstance(v, dict | list) for v in value) and len(value) <= 10:
            return ", ".join(str(v) for v in value) or "[]"
        return f"[{len(value)} items]"
    if isinstance(value, dict):
        return f"{{{len(value)} fields}}" if len(value) > 4 else json.dumps(value)
    return str(value)
