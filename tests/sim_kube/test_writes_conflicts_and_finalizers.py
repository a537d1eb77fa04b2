"""Create, update and delete as kube-apiserver does them: server-owned metadata,
optimistic concurrency, preconditions, and finalizers holding a deletion."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pyccm_sim.kube.testing import KubeSimHandle
from tests.support.kube_http import api_client, as_json, client, http


def _error(excinfo: pytest.ExceptionInfo[Any]) -> dict[str, object]:
    body: dict[str, object] = json.loads(excinfo.value.body)
    return body


def test_create_fills_server_owned_metadata(kube: KubeSimHandle, core: Any) -> None:
    before = kube.resource_version
    created = as_json(
        core.create_namespaced_service(
            "default", {"metadata": {"generateName": "web-"}, "spec": {"ports": [{"port": 80}]}}
        )
    )
    meta = created["metadata"]
    assert meta["name"].startswith("web-")
    assert len(meta["name"]) == len("web-") + 5
    assert len(meta["uid"]) == 36
    stored = kube.get("services", meta["name"], "default")
    assert stored is not None
    assert stored["metadata"]["creationTimestamp"].endswith("Z")
    assert int(meta["resourceVersion"]) == before + 1
    assert meta["generation"] == 1
    assert created["spec"]["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]


def test_resource_versions_increase_across_all_resources(kube: KubeSimHandle, core: Any) -> None:
    coordination = client.CoordinationV1Api(api_client(kube))
    lease = as_json(
        coordination.create_namespaced_lease("kube-system", {"metadata": {"name": "l"}})
    )
    event = as_json(
        core.create_namespaced_event(
            "default",
            {"metadata": {"name": "e"}, "involvedObject": {"kind": "Node", "name": "node-0000"}},
        )
    )
    assert (
        int(event["metadata"]["resourceVersion"]) == int(lease["metadata"]["resourceVersion"]) + 1
    )


def test_creating_an_existing_name_is_already_exists(core: Any) -> None:
    with pytest.raises(client.ApiException) as excinfo:
        core.create_node({"metadata": {"name": "node-0000"}})
    assert excinfo.value.status == 409
    assert _error(excinfo)["reason"] == "AlreadyExists"
    assert _error(excinfo)["message"] == 'nodes "node-0000" already exists'


def test_creating_in_a_missing_namespace_is_not_found(core: Any) -> None:
    with pytest.raises(client.ApiException) as excinfo:
        core.create_namespaced_service(
            "nope", {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 1}]}}
        )
    assert (excinfo.value.status, _error(excinfo)["message"]) == (
        404,
        'namespaces "nope" not found',
    )


def test_a_stale_update_conflicts_and_a_fresh_one_wins(kube: KubeSimHandle) -> None:
    coordination = client.CoordinationV1Api(api_client(kube))
    lease = coordination.create_namespaced_lease(
        "kube-system", {"metadata": {"name": "ccm"}, "spec": {"holderIdentity": "a"}}
    )
    stale = as_json(lease)
    fresh = as_json(lease)
    fresh["spec"]["holderIdentity"] = "b"
    coordination.replace_namespaced_lease("ccm", "kube-system", fresh)
    stale["spec"]["holderIdentity"] = "c"
    with pytest.raises(client.ApiException) as excinfo:
        coordination.replace_namespaced_lease("ccm", "kube-system", stale)
    assert excinfo.value.status == 409
    assert _error(excinfo)["reason"] == "Conflict"
    assert "the object has been modified" in str(_error(excinfo)["message"])
    stored = kube.get("leases", "ccm", "kube-system")
    assert stored is not None
    assert stored["spec"]["holderIdentity"] == "b"


def test_an_update_without_resource_version_is_unconditional(kube: KubeSimHandle) -> None:
    node = kube.get("nodes", "node-0000")
    assert node is not None
    del node["metadata"]["resourceVersion"]
    node["metadata"]["labels"]["role"] = "edge"
    assert http(kube, "PUT", "/api/v1/nodes/node-0000", json.dumps(node).encode()).status == 200
    stored = kube.get("nodes", "node-0000")
    assert stored is not None
    assert stored["metadata"]["labels"]["role"] == "edge"


def test_a_no_op_update_keeps_the_resource_version(kube: KubeSimHandle) -> None:
    node = kube.get("nodes", "node-0000")
    reply = http(kube, "PUT", "/api/v1/nodes/node-0000", json.dumps(node).encode())
    assert reply.json()["metadata"]["resourceVersion"] == node["metadata"]["resourceVersion"]  # type: ignore[index]


def test_generation_moves_only_when_the_spec_changes(kube: KubeSimHandle, core: Any) -> None:
    core.patch_namespaced_service("svc-00000", "default", {"metadata": {"labels": {"a": "b"}}})
    assert kube.get("services", "svc-00000", "default")["metadata"]["generation"] == 1  # type: ignore[index]
    core.patch_namespaced_service("svc-00000", "default", {"spec": {"sessionAffinity": "ClientIP"}})
    assert kube.get("services", "svc-00000", "default")["metadata"]["generation"] == 2  # type: ignore[index]


def test_delete_preconditions_guard_against_a_replaced_object(
    kube: KubeSimHandle, core: Any
) -> None:
    with pytest.raises(client.ApiException) as excinfo:
        core.delete_node("node-0000", body={"preconditions": {"uid": "not-the-uid"}})
    assert excinfo.value.status == 409
    assert "Precondition failed: UID in precondition: not-the-uid" in str(
        _error(excinfo)["message"]
    )
    node = kube.get("nodes", "node-0000")
    assert node is not None
    uid = node["metadata"]["uid"]
    status = as_json(core.delete_node("node-0000", body={"preconditions": {"uid": uid}}))
    assert (status["status"], status["details"]["uid"]) == ("Success", uid)
    assert kube.get("nodes", "node-0000") is None


def test_a_stale_resource_version_precondition_conflicts(kube: KubeSimHandle) -> None:
    body = json.dumps({"preconditions": {"resourceVersion": "1"}}).encode()
    reply = http(kube, "DELETE", "/api/v1/nodes/node-0001", body)
    assert (reply.status, reply.json()["reason"]) == (409, "Conflict")


def test_finalizers_hold_a_deletion_until_the_last_one_goes(kube: KubeSimHandle, core: Any) -> None:
    finalizers = ["service.kubernetes.io/load-balancer-cleanup", "example.com/other"]
    core.patch_namespaced_service("svc-00000", "default", {"metadata": {"finalizers": finalizers}})
    terminating = as_json(core.delete_namespaced_service("svc-00000", "default"))
    assert terminating["metadata"]["deletionTimestamp"]
    assert kube.get("services", "svc-00000", "default") is not None
    core.patch_namespaced_service(
        "svc-00000",
        "default",
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/other"]}},
    )
    assert kube.get("services", "svc-00000", "default") is not None
    core.patch_namespaced_service_status(
        "svc-00000", "default", [{"op": "remove", "path": "/metadata/finalizers"}]
    )
    assert kube.get("services", "svc-00000", "default") is None


def test_no_new_finalizers_while_deleting(kube: KubeSimHandle, core: Any) -> None:
    core.patch_node("node-0000", {"metadata": {"finalizers": ["a"]}})
    core.delete_node("node-0000")
    with pytest.raises(client.ApiException) as excinfo:
        core.patch_node("node-0000", {"metadata": {"finalizers": ["b"]}})
    assert (excinfo.value.status, _error(excinfo)["reason"]) == (422, "Invalid")


def test_deleting_a_namespace_deletes_its_objects(kube: KubeSimHandle, core: Any) -> None:
    core.delete_namespace("team-a")
    namespace = kube.get("namespaces", "team-a")
    assert namespace is not None
    assert namespace["status"]["phase"] == "Terminating"
    # The namespace controller empties it a moment later, then the namespace goes.
    kube.wait_for("services", "svc-00001", lambda s: s is None, namespace="team-a")
    kube.wait_for("namespaces", "team-a", lambda n: n is None)


def test_a_provider_id_can_be_set_once(kube: KubeSimHandle, core: Any) -> None:
    core.patch_node("node-0000", {"spec": {"providerID": "openstack:///abc"}})
    with pytest.raises(client.ApiException) as excinfo:
        core.patch_node("node-0000", {"spec": {"providerID": "openstack:///other"}})
    assert excinfo.value.status == 422
    causes = _error(excinfo)["details"]["causes"]  # type: ignore[index]
    assert causes[0]["field"] == "spec.providerID"


def test_invalid_objects_are_rejected_with_field_causes(core: Any) -> None:
    with pytest.raises(client.ApiException) as excinfo:
        core.create_namespaced_service(
            "default", {"metadata": {"name": "Bad_Name"}, "spec": {"ports": [{"port": 70000}]}}
        )
    body = _error(excinfo)
    assert (excinfo.value.status, body["reason"]) == (422, "Invalid")
    fields = [c["field"] for c in body["details"]["causes"]]  # type: ignore[index]
    assert fields == ["metadata.name", "spec.ports[0].port"]


def test_dry_run_changes_nothing(kube: KubeSimHandle) -> None:
    before = kube.resource_version
    body = json.dumps({"metadata": {"name": "ghost"}}).encode()
    reply = http(kube, "POST", "/api/v1/nodes?dryRun=All", body)
    assert reply.status == 201
    assert kube.get("nodes", "ghost") is None
    assert kube.resource_version == before
