"""The write path kubectl relies on, over raw HTTP: bodies decoded as the Go types would be
(wrong types refused, unknown fields refused, warned about or dropped as
`fieldValidation` asks), the API server's validation of the deployment kinds, strategic
merge patches keyed as upstream keys them, managedFields, and server-side apply with its
conflicts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pyccm_sim.kube.testing import KubeSimHandle
from tests.support.kube_http import Reply, http

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
APPLY = "application/apply-patch+yaml"


def deployment(name: str = "web", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {"name": "app", "image": "nginx", "ports": [{"containerPort": 80}]},
                        {"name": "sidecar", "image": "busybox"},
                    ]
                },
            },
            **spec,
        },
    }


def send(
    kube: KubeSimHandle,
    method: str,
    path: str,
    body: Any,
    content_type: str = "application/json",
) -> Reply:
    return http(kube, method, path, json.dumps(body).encode(), content_type=content_type)


def stored(kube: KubeSimHandle, name: str = "web") -> Any:
    obj = kube.get("deployments", name, "default")
    assert obj is not None
    return obj


# -- decoding -------------------------------------------------------------------------------


def test_a_value_of_the_wrong_type_is_refused_as_go_decoding_refuses_it(
    kube: KubeSimHandle,
) -> None:
    reply = send(kube, "POST", DEPLOYMENTS, deployment(replicas="two"))
    assert (reply.status, reply.json()["reason"]) == (400, "BadRequest")
    assert reply.json()["message"] == (
        'Deployment in version "v1" cannot be handled as a Deployment: json: cannot unmarshal '
        "string into Go struct field DeploymentSpec.spec.replicas of type int32"
    )
    assert kube.get("deployments", "web", "default") is None


def test_strict_field_validation_refuses_unknown_fields(kube: KubeSimHandle) -> None:
    body = deployment(replica=2)
    body["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    reply = send(kube, "POST", f"{DEPLOYMENTS}?fieldValidation=Strict", body)
    assert reply.status == 400
    assert reply.json()["message"] == (
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
        'unknown field "spec.template.spec.containers[0].imagePullPolicyy", '
        'unknown field "spec.replica"'
    )
    assert kube.get("deployments", "web", "default") is None


def test_by_default_unknown_fields_are_dropped_with_a_warning(kube: KubeSimHandle) -> None:
    reply = send(kube, "POST", DEPLOYMENTS, deployment(replica=2))
    assert reply.status == 201
    assert reply.headers["Warning"] == '299 - "unknown field \\"spec.replica\\""'
    assert "replica" not in stored(kube)["spec"]
    ignored = send(kube, "POST", f"{DEPLOYMENTS}?fieldValidation=Ignore", deployment("b", x=1))
    assert ignored.status == 201
    assert "Warning" not in ignored.headers
    assert "x" not in stored(kube, "b")["spec"]


def test_an_unknown_field_validation_directive_is_a_bad_request(kube: KubeSimHandle) -> None:
    reply = send(kube, "POST", f"{DEPLOYMENTS}?fieldValidation=Loose", deployment())
    assert reply.status == 400
    assert 'fieldValidation: Unsupported value: "Loose"' in reply.json()["message"]


def test_secret_data_must_be_base64(kube: KubeSimHandle) -> None:
    secret = {"metadata": {"name": "s"}, "data": {"key": "not base64!"}}
    reply = send(kube, "POST", "/api/v1/namespaces/default/secrets", secret)
    assert reply.status == 400
    assert reply.json()["message"] == (
        'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 3'
    )


# -- validation of the deployment kinds -----------------------------------------------------


def invalid_fields(reply: Reply) -> list[str]:
    assert (reply.status, reply.json()["reason"]) == (422, "Invalid"), reply.body
    return [cause["field"] for cause in reply.json()["details"]["causes"]]


@pytest.mark.parametrize(
    ("path", "body", "fields"),
    [
        (
            DEPLOYMENTS,
            {**deployment(), "spec": {**deployment()["spec"], "selector": None}},
            ["spec.selector"],
        ),
        (
            DEPLOYMENTS,
            {
                **deployment(),
                "spec": {**deployment()["spec"], "selector": {"matchLabels": {"a": "b"}}},
            },
            ["spec.template.metadata.labels"],
        ),
        (
            DEPLOYMENTS,
            {
                **deployment(),
                "spec": {
                    **deployment()["spec"],
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{}]},
                    },
                },
            },
            ["spec.template.spec.containers[0].name", "spec.template.spec.containers[0].image"],
        ),
        (
            "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
            {"metadata": {"name": "p"}, "spec": {"minAvailable": 1, "maxUnavailable": 1}},
            ["spec"],
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
            {
                "metadata": {"name": "b"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Thing", "name": "r"},
                "subjects": [{"kind": "Robot", "name": "x"}],
            },
            ["roleRef.kind", "subjects[0].kind"],
        ),
        (
            "/api/v1/namespaces/default/configmaps",
            {"metadata": {"name": "c"}, "data": {"bad key": "v"}},
            ["data[bad key]"],
        ),
    ],
    ids=[
        "no-selector",
        "selector-misses-labels",
        "container-without-name-or-image",
        "pdb-with-both-bounds",
        "binding-to-an-unknown-kind",
        "config-key",
    ],
)
def test_the_api_servers_validation_refuses_bad_objects(
    kube: KubeSimHandle, path: str, body: dict[str, Any], fields: list[str]
) -> None:
    assert invalid_fields(send(kube, "POST", path, body)) == fields


def test_what_may_not_change_after_create_does_not(kube: KubeSimHandle) -> None:
    assert send(kube, "POST", DEPLOYMENTS, deployment()).status == 201
    selector = {"spec": {"selector": {"matchLabels": {"app": "other"}}}}
    patch = send(kube, "PATCH", f"{DEPLOYMENTS}/web", selector, "application/merge-patch+json")
    assert "spec.selector" in invalid_fields(patch)
    bindings = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}
    assert send(kube, "POST", bindings, {"metadata": {"name": "b"}, "roleRef": ref}).status == 201
    moved = {"roleRef": {**ref, "name": "edit"}}
    reply = send(kube, "PATCH", f"{bindings}/b", moved, "application/merge-patch+json")
    assert invalid_fields(reply) == ["roleRef"]
    maps = "/api/v1/namespaces/default/configmaps"
    frozen = {"metadata": {"name": "c"}, "data": {"k": "v"}, "immutable": True}
    assert send(kube, "POST", maps, frozen).status == 201
    changed = send(kube, "PATCH", f"{maps}/c", {"data": {"k": "w"}}, "application/merge-patch+json")
    assert invalid_fields(changed) == ["data"]


def test_a_strategic_merge_patch_merges_containers_by_name(kube: KubeSimHandle) -> None:
    assert send(kube, "POST", DEPLOYMENTS, deployment()).status == 201
    # What kubectl apply sends to change one container's image.
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}],
                    "containers": [{"name": "app", "image": "nginx:2"}],
                }
            }
        }
    }
    reply = send(
        kube, "PATCH", f"{DEPLOYMENTS}/web", patch, "application/strategic-merge-patch+json"
    )
    assert reply.status == 200
    containers = stored(kube)["spec"]["template"]["spec"]["containers"]
    assert containers == [
        {"name": "app", "image": "nginx:2", "ports": [{"containerPort": 80}]},
        {"name": "sidecar", "image": "busybox"},
    ]
    assert stored(kube)["metadata"]["generation"] == 2


# -- managedFields and server-side apply ----------------------------------------------------


def owners(obj: Any, field: str) -> list[tuple[str, str]]:
    return [
        (m["manager"], m["operation"])
        for m in obj["metadata"].get("managedFields", [])
        if field in m["fieldsV1"].get("f:spec", {})
    ]


def apply(kube: KubeSimHandle, body: dict[str, Any], query: str = "fieldManager=ci") -> Reply:
    path = f"{DEPLOYMENTS}/{body['metadata']['name']}?{query}"
    return send(kube, "PATCH", path, body, APPLY)


def test_a_write_that_names_a_field_manager_owns_what_it_changed(kube: KubeSimHandle) -> None:
    assert (
        send(kube, "POST", f"{DEPLOYMENTS}?fieldManager=maker", deployment(replicas=1)).status
        == 201
    )
    assert owners(stored(kube), "f:replicas") == [("maker", "Update")]
    scale = {"spec": {"replicas": 4}}
    path = f"{DEPLOYMENTS}/web?fieldManager=scaler"
    assert send(kube, "PATCH", path, scale, "application/merge-patch+json").status == 200
    assert owners(stored(kube), "f:replicas") == [("scaler", "Update")]
    assert owners(stored(kube), "f:selector") == [("maker", "Update")]


def test_server_side_apply_creates_then_updates_without_writing_a_no_op(
    kube: KubeSimHandle,
) -> None:
    created = apply(kube, deployment(replicas=2))
    assert created.status == 201
    assert owners(created.json(), "f:replicas") == [("ci", "Apply")]
    version = kube.resource_version

    again = apply(kube, deployment(replicas=2))

    assert again.status == 200
    assert kube.resource_version == version
    assert (
        again.json()["metadata"]["resourceVersion"] == created.json()["metadata"]["resourceVersion"]
    )
    assert apply(kube, deployment(replicas=3)).json()["spec"]["replicas"] == 3


def test_server_side_apply_removes_what_the_manager_no_longer_applies(
    kube: KubeSimHandle,
) -> None:
    labelled = deployment(replicas=2)
    labelled["metadata"]["labels"] = {"tier": "web", "team": "a"}
    assert apply(kube, labelled).status == 201
    # Another manager's label stays; the applier's own dropped label goes.
    path = f"{DEPLOYMENTS}/web?fieldManager=other"
    extra = {"metadata": {"labels": {"owner": "ops"}}}
    assert send(kube, "PATCH", path, extra, "application/merge-patch+json").status == 200
    labelled["metadata"]["labels"] = {"tier": "web"}
    del labelled["spec"]["replicas"]

    reply = apply(kube, labelled)

    assert reply.status == 200
    assert stored(kube)["metadata"]["labels"] == {"tier": "web", "owner": "ops"}
    # The dropped replicas went, and the API server's default came back.
    assert stored(kube)["spec"]["replicas"] == 1


def test_server_side_apply_refuses_another_managers_field_unless_forced(
    kube: KubeSimHandle,
) -> None:
    assert apply(kube, deployment(replicas=2)).status == 201
    refused = apply(kube, deployment(replicas=5), "fieldManager=other")
    assert (refused.status, refused.json()["reason"]) == (409, "Conflict")
    assert refused.json()["message"] == (
        'Apply failed with 1 conflict: conflict with "ci": .spec.replicas'
    )
    assert refused.json()["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "ci"',
            "field": ".spec.replicas",
        }
    ]
    # The same value is no conflict: both own the field.
    assert apply(kube, deployment(replicas=2), "fieldManager=other").status == 200
    forced = apply(kube, deployment(replicas=5), "fieldManager=third&force=true")
    assert forced.status == 200
    assert owners(forced.json(), "f:replicas") == [("third", "Apply")]


def test_apply_and_force_are_checked_like_the_api_server(kube: KubeSimHandle) -> None:
    no_manager = apply(kube, deployment(), "")
    assert invalid_fields(no_manager) == ["fieldManager"]
    assert send(kube, "POST", DEPLOYMENTS, deployment()).status == 201
    path = f"{DEPLOYMENTS}/web?force=true"
    merge = send(kube, "PATCH", path, {"spec": {"replicas": 2}}, "application/merge-patch+json")
    assert invalid_fields(merge) == ["force"]
    wrong_kind = apply(kube, {**deployment(), "kind": "StatefulSet"})
    assert wrong_kind.status == 400


def test_nulls_decode_as_go_zero_values(kube: KubeSimHandle) -> None:
    body = deployment()
    body["metadata"]["labels"] = {"kept": "yes", "empty": None}
    body["spec"]["paused"] = None
    assert send(kube, "POST", DEPLOYMENTS, body).status == 201
    assert stored(kube)["metadata"]["labels"] == {"kept": "yes", "empty": ""}
    assert "paused" not in stored(kube)["spec"]


def test_an_apply_configuration_may_be_yaml(kube: KubeSimHandle) -> None:
    config = (
        b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\n"
        b"data: {when: 2024-01-01T00:00:00Z}\n"
    )
    path = "/api/v1/namespaces/default/configmaps/c?fieldManager=ci"
    reply = http(kube, "PATCH", path, config, content_type=APPLY)
    assert reply.status == 201
    assert reply.json()["data"] == {"when": "2024-01-01T00:00:00Z"}
    not_yaml = http(kube, "PATCH", path, b"{a: [", content_type=APPLY)
    assert (not_yaml.status, not_yaml.json()["reason"]) == (400, "BadRequest")
