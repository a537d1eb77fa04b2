"""/openapi/v3 and /openapi/v2 describe every kind the simulator stores, the way kubectl
reads them: the v3 index points at one document per group-version by a hash of its
content, each kind's schema carries its x-kubernetes-group-version-kind and its PATCH
operation takes `fieldValidation`; v2 is JSON, and for kubectl's protobuf request a
document that decodes (and holds no schemas). The shapes behind the schemas name exactly
the upstream types' fields, as the kubernetes client's models know them."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from kubernetes import client as typed_client

from pyccm_sim.kube.resources import ALL_RESOURCES
from pyccm_sim.kube.schema import ListOf, MapOf, Shape, Struct
from pyccm_sim.kube.testing import KubeSimHandle
from tests.support.kube_http import http

client: Any = typed_client


def v3_key(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def test_the_v3_index_lists_each_group_version_by_the_hash_of_its_document(
    kube: KubeSimHandle,
) -> None:
    index = http(kube, "GET", "/openapi/v3").json()["paths"]
    assert set(index) == {v3_key(r.group, r.version) for r in ALL_RESOURCES}
    for key, entry in index.items():
        url = entry["serverRelativeURL"]
        path, _, query = url.partition("?hash=")
        document = http(kube, "GET", url)
        assert document.status == 200, key
        assert path == f"/openapi/v3/{key}"
        assert query == hashlib.sha512(document.body).hexdigest().upper()


@pytest.mark.parametrize("rtype", ALL_RESOURCES, ids=lambda r: f"{r.plural}.{r.group}")
def test_every_kind_has_its_schema_and_a_patch_that_takes_field_validation(
    kube: KubeSimHandle, rtype: Any
) -> None:
    document = http(kube, "GET", f"/openapi/v3/{v3_key(rtype.group, rtype.version)}").json()
    gvk = {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}
    schema = document["components"]["schemas"][rtype.schema.name]
    assert schema["x-kubernetes-group-version-kind"] == [gvk]
    assert {"apiVersion", "kind", "metadata"} <= set(schema["properties"])
    patches = [
        item["patch"]
        for item in document["paths"].values()
        if item.get("patch", {}).get("x-kubernetes-group-version-kind") == gvk
    ]
    assert patches
    for patch in patches:
        assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
        # No strategic merge patch here: kubectl computes those from its built-in types.
        assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]


def test_merge_keys_are_published_with_the_lists_they_key(kube: KubeSimHandle) -> None:
    schemas = http(kube, "GET", "/openapi/v3/apis/apps/v1").json()["components"]["schemas"]
    containers = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["x-kubernetes-patch-strategy"] == "merge"
    volumes = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["volumes"]
    assert volumes["x-kubernetes-patch-strategy"] == "merge,retainKeys"
    tolerations = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["tolerations"]
    assert tolerations == {"x-kubernetes-preserve-unknown-fields": True}


def test_v2_is_json_with_every_kind_and_protobuf_for_kubectl(kube: KubeSimHandle) -> None:
    document = http(kube, "GET", "/openapi/v2").json()
    assert document["swagger"] == "2.0"
    for rtype in ALL_RESOURCES:
        kinds = document["definitions"][rtype.schema.name]["x-kubernetes-group-version-kind"]
        assert kinds == [{"group": rtype.group, "version": rtype.version, "kind": rtype.kind}]
    reply = http(
        kube,
        "GET",
        "/openapi/v2",
        accept="application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    )
    assert reply.status == 200
    assert reply.headers["Content-Type"] == (
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    )
    # openapi_v2.Document{swagger: "2.0", info: {title: "Kubernetes", version: "v1.32.0"}}
    assert reply.body == b"\n\x032.0\x12\x15\n\nKubernetes\x12\x07v1.32.0"


def test_an_unknown_group_version_document_is_not_found(kube: KubeSimHandle) -> None:
    assert http(kube, "GET", "/openapi/v3/apis/batch/v1").status == 404


# -- the shapes against the upstream types ----------------------------------------------------

# The kubernetes client names most models V1<Type>; these few it names after their group.
_MODEL_NAMES = {
    "io.k8s.api.core.v1.Event": "CoreV1Event",
    "io.k8s.api.events.v1.Event": "EventsV1Event",
    "io.k8s.api.rbac.v1.Subject": "RbacV1Subject",
}


def structs(shape: Shape, found: dict[str, Struct]) -> dict[str, Struct]:
    match shape:
        case Struct() if shape.name not in found:
            found[shape.name] = shape
            for field in shape.fields.values():
                structs(field, found)
        case ListOf():
            structs(shape.items, found)
        case MapOf():
            structs(shape.values, found)
        case _:
            pass
    return found


ALL_STRUCTS: dict[str, Struct] = {}
for _rtype in ALL_RESOURCES:
    structs(_rtype.schema, ALL_STRUCTS)


@pytest.mark.parametrize("struct", ALL_STRUCTS.values(), ids=lambda s: s.go_name)
def test_a_shape_names_exactly_the_upstream_types_fields(struct: Struct) -> None:
    model = getattr(client, _MODEL_NAMES.get(struct.name, f"V1{struct.go_name}"))
    assert set(struct.fields) == set(model.attribute_map.values())
