"""Which cluster this process works for: `--cluster-id`, or the `kube-system` UID.

The id marks every cloud resource pyccm creates (its ownership tag). A worker takes it from
`--cluster-id` (default `$PYCCM_CLUSTER_ID`); without one, a worker on the bus asks the
manager (`workers.runtime.bus.ask_cluster_id`: the manager reads the UID, so workers never
call the API server), and a standalone worker, `pyccm gc` and `pyccm plan` read the
`kube-system` namespace's UID themselves (`resolve_cluster_id`). A standalone worker that
cannot runs without an id, as upstream does (ownership by name alone), and says so once.
"""

from __future__ import annotations

import argparse
import logging
import os

from pyccm.flags.cluster_id import add_cluster_id_flag
from pyccm.provider.errors import ConfigError

__all__ = ["add_cloud_flags", "add_cluster_id_flag", "resolve_cluster_id"]

log = logging.getLogger(__name__)


def add_cloud_flags(parser: argparse.ArgumentParser) -> None:
    """The provider flags of a worker and of the one-shot commands (`pyccm gc`, `plan`)."""
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


def can_reach_kubernetes(kubeconfig: str) -> bool:
    return bool(kubeconfig) or "KUBERNETES_SERVICE_HOST" in os.environ


def resolve_cluster_id(*, given: str, kubeconfig: str, required: bool) -> str:
    """`given`, or the UID read with `kubeconfig` (in-cluster when ""). With no API to
    read from, or a read that fails (RBAC without `get` on namespaces), `required` makes
    it a `ConfigError` (exit 2); else the process runs without an id and says so once."""
    if given:
        return given
    if not required and not can_reach_kubernetes(kubeconfig):
        log.warning(
            "no --cluster-id and no Kubernetes API to read it from: cloud resources are "
            "owned by name alone, as upstream (two clusters with one --cluster-name can "
            "take each other's load balancers)"
        )
        return ""
    # Here, not at the top: the command lines import this module for the flag alone.
    from pyccm.kubeapi.client import KubeClient, KubeSettings
    from pyccm.kubeapi.cluster import read_cluster_id

    try:
        client = KubeClient(settings=KubeSettings(kubeconfig=kubeconfig))
        try:
            return read_cluster_id(client)
        finally:
            client.close()
    except Exception as error:  # a bad kubeconfig, no service account, an API error
        if not required:
            # A tree whose RBAC lacks `get` on namespaces keeps running, as upstream would.
            log.warning(
                "cannot read the cluster id (the kube-system namespace's UID): %s; cloud "
                "resources are owned by name alone (give --cluster-id)",
                error,
            )
            return ""
        raise ConfigError(
            f"cannot read the cluster id (the kube-system namespace's UID): {error}; "
            "give --cluster-id"
        ) from error
