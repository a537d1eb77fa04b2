"""A failed Node DELETE records upstream's Warning `DeletingNodeFailed`
(pyccm/workers/lifecycle/README.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pyccm.kubeapi.client import KubeClient, KubeSettings
from pyccm.kubeapi.writer import Writer
from pyccm.protocol.messages import DeleteNode, FailureKind, ObjectRef, RecordEvent
from pyccm_sim.kube.settings import User
from pyccm_sim.kube.testing import KubeSimHandle, running_kube_sim

NODE = "node-0000"

# The CCM's role as a cluster whose operator dropped `delete` on nodes (the mistake of
# kubernetes/cloud-provider-openstack#3165): everything the writer needs except the DELETE.
NO_NODE_DELETE = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ccm-without-node-delete}
rules:
  - apiGroups: [""]
    resources: ["nodes"]
    verbs: ["get", "list", "watch", "patch"]
  - apiGroups: [""]
    resources: ["events"]
    verbs: ["create", "patch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ccm-without-node-delete}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ccm-without-node-delete}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: User, name: ccm}
"""
CCM_TOKEN = "ccm-token"


def delete_of(kube: KubeSimHandle, name: str, *, uid: str | None = None) -> DeleteNode:
    """The lifecycle worker's DeleteNode, with its Warning for a failure."""
    stored = kube.get("nodes", name)
    real_uid = "" if stored is None else str(stored["metadata"]["uid"])
    failed = RecordEvent(
        regarding=ObjectRef(kind="Node", name=name, uid=real_uid),
        reason="DeletingNodeFailed",
        message=f"Failed deleting node {name}",
        type="Warning",
        component="cloud-node-lifecycle-controller",
    )
    return DeleteNode(name=name, uid=real_uid if uid is None else uid, failed_event=failed)


def warnings(kube: KubeSimHandle) -> list[dict[str, Any]]:
    return [e for e in kube.list_objects("events", "default") if e["type"] == "Warning"]


def test_a_delete_refused_with_500_records_a_warning_on_the_node(
    kube: KubeSimHandle, client: KubeClient
) -> None:
    action = delete_of(kube, NODE)
    kube.set_faults(error_rates={"delete": 1.0})
    (failure,) = Writer(client=client).apply((action,))
    assert failure.kind is FailureKind.UNAVAILABLE
    assert kube.get("nodes", NODE) is not None
    (event,) = warnings(kube)
    assert event["reason"] == "DeletingNodeFailed"
    assert event["involvedObject"]["kind"] == "Node"
    assert event["involvedObject"]["name"] == NODE
    assert event["involvedObject"]["uid"] == action.uid
    assert event["source"]["component"] == "cloud-node-lifecycle-controller"
    assert event["message"].startswith(f"Failed deleting node {NODE}: 500 InternalError")


@pytest.fixture
def ccm_without_delete(tmp_path: Path) -> Iterator[tuple[KubeSimHandle, KubeClient]]:
    rbac = tmp_path / "rbac.yaml"
    rbac.write_text(NO_NODE_DELETE)
    tokens = ((CCM_TOKEN, User("ccm")),)
    with running_kube_sim(seed_nodes=1, rbac_files=(rbac,), tokens=tokens) as kube:
        config = yaml.safe_load(kube.kubeconfig_path.read_text())
        for entry in config["users"]:
            entry["user"]["token"] = CCM_TOKEN
        kubeconfig = tmp_path / "ccm-kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(config))
        client = KubeClient(settings=KubeSettings(kubeconfig=str(kubeconfig)))
        yield kube, client
        client.close()


def test_a_delete_forbidden_by_rbac_records_a_warning_with_the_apis_message(
    ccm_without_delete: tuple[KubeSimHandle, KubeClient],
) -> None:
    kube, client = ccm_without_delete
    (failure,) = Writer(client=client).apply((delete_of(kube, NODE),))
    assert failure.kind is FailureKind.FORBIDDEN
    assert kube.get("nodes", NODE) is not None
    (event,) = warnings(kube)
    assert event["reason"] == "DeletingNodeFailed"
    assert event["message"].startswith(f"Failed deleting node {NODE}: 403 Forbidden")
    assert 'cannot delete resource "nodes"' in event["message"]


def test_repeated_failures_are_one_warning_with_a_count(
    kube: KubeSimHandle, client: KubeClient
) -> None:
    action = delete_of(kube, NODE)
    kube.set_faults(error_rates={"delete": 1.0})
    writer = Writer(client=client)
    writer.apply((action,))
    writer.apply((action,))
    assert [(e["reason"], e["count"]) for e in warnings(kube)] == [("DeletingNodeFailed", 2)]


@pytest.mark.parametrize(
    ("situation", "kind"),
    [("already gone", FailureKind.NOT_FOUND), ("re-created", FailureKind.PRECONDITION)],
)
def test_a_node_already_gone_or_re_created_gets_no_warning(
    kube: KubeSimHandle, client: KubeClient, situation: str, kind: FailureKind
) -> None:
    if situation == "already gone":
        action = delete_of(kube, NODE)
        kube.delete("nodes", NODE)
    else:
        action = delete_of(kube, NODE, uid="uid-of-the-node-that-was-deleted")
    (failure,) = Writer(client=client).apply((action,))
    assert failure.kind is kind
    assert warnings(kube) == []
