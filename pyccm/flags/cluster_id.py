"""`--cluster-id`: which cluster a process works for (kubernetes/cloud-provider-openstack#3102).

The id marks every cloud resource pyccm creates, so two clusters that share a
`--cluster-name` never take each other's load balancers. By default it is the
`kube-system` namespace's UID: the manager reads it and hands it to its workers over the
bus (`WhoIs` / `Identity`), so a worker on the bus never calls the API server; a
standalone worker, `pyccm gc` and `pyccm plan` read it themselves.
"""

from __future__ import annotations

import argparse
import os

ENV = "PYCCM_CLUSTER_ID"


def add_cluster_id_flag(parser: argparse._ActionsContainer) -> None:
    """`--cluster-id`, on the manager and every command that creates or lists cloud resources."""
    parser.add_argument(
        "--cluster-id",
        default=os.environ.get(ENV, ""),
        help="this cluster's unique id, written in the tags of every cloud resource pyccm "
        "creates (default $PYCCM_CLUSTER_ID, else the kube-system namespace's UID: read "
        "by the manager and given to its workers, read directly when standalone)",
    )
