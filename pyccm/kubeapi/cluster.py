"""The cluster's identity: the UID of the `kube-system` namespace.

`--cluster-name` is an operator's choice and two clusters may share it; the UID of a
namespace every cluster has, and nobody deletes, is unique per cluster and stable for its
life. pyccm writes it into the tags of every cloud resource it creates
(kubernetes/cloud-provider-openstack#3102), so a process with Kubernetes access (the manager, a
standalone worker, `pyccm gc`, `pyccm plan`) reads it once at start; the manager hands it to its
workers over the bus.
"""

from __future__ import annotations

import msgspec

from pyccm.kubeapi.client import KubeClient

NAMESPACE = "kube-system"


class _Meta(msgspec.Struct, frozen=True):
    uid: str = ""


class _Namespace(msgspec.Struct, frozen=True):
    metadata: _Meta


def read_cluster_id(client: KubeClient) -> str:
    """The `kube-system` namespace's UID; raises a `KubeError` when it cannot be read."""
    body = client.request("GET", f"/api/v1/namespaces/{NAMESPACE}")
    uid = msgspec.json.decode(body, type=_Namespace).metadata.uid
    if not uid:
        raise ValueError(f"namespace {NAMESPACE} has no uid")
    return uid
