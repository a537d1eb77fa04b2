"""What the one-shot commands (`pyccm gc`, `pyccm plan`) share with a standalone worker:
reading Nodes and Services once through `kubeapi` (no watch) and building the provider as
a worker does, with the same flags."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Generic, TypeVar

from pyccm.kubeapi.client import KubeClient
from pyccm.kubeapi.informer import NODES, SERVICES, Informer
from pyccm.protocol.views import Node, Service
from pyccm.provider.errors import ConfigError
from pyccm.provider.interface import Cloud, LoadBalancers
from pyccm.provider.registry import create_cloud
from pyccm.provider.settings import ProviderSettings

Obj = TypeVar("Obj")


class _Discard(Generic[Obj]):
    """A sink for a one-time list: the objects are taken from `list_all` directly."""

    def replace(self, objs: list[Obj]) -> None: ...

    def upsert(self, obj: Obj) -> None: ...

    def delete(self, key: str) -> None: ...


def services(client: KubeClient) -> list[Service]:
    """Every Service, page by page, as the informers decode them."""
    objects, _ = Informer(client=client, resource=SERVICES, sink=_Discard[Service]()).list_all()
    return objects


def nodes(client: KubeClient) -> list[Node]:
    objects, _ = Informer(client=client, resource=NODES, sink=_Discard[Node]()).list_all()
    return objects


def load_balancers(args: argparse.Namespace, *, cluster_id: str) -> tuple[Cloud, LoadBalancers]:
    cloud = create_cloud(
        args.cloud_provider,
        settings=ProviderSettings(
            cloud_config=Path(args.cloud_config) if args.cloud_config else None,
            cluster_name=args.cluster_name,
            cluster_id=cluster_id,
        ),
    )
    lbs = cloud.load_balancers()
    if lbs is None:
        cloud.close()
        raise ConfigError(f"cloud provider {args.cloud_provider!r} has no load balancers")
    return cloud, lbs
