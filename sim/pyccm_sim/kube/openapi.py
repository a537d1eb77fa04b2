"""/openapi/v2 and /openapi/v3: the API's schema, for kubectl's validation and patches.

kubectl 1.32 reads /openapi/v3 first: the index (`{"paths": {"apis/apps/v1":
{"serverRelativeURL": "/openapi/v3/apis/apps/v1?hash=..."}}}`), then one document per
group-version. It looks for the PATCH operation tagged with the kind's
`x-kubernetes-group-version-kind`; when that operation takes a `fieldValidation`
parameter, kubectl validates nothing itself and sends `fieldValidation=Strict`, so the
server's decoding (schema.py) is what refuses an unknown field, as on a real cluster. Each
kind's schema carries its `x-kubernetes-group-version-kind` and the shapes of shapes.py,
merge keys included.

The PATCH operations list the apply, JSON and merge patch types but not the strategic
merge patch one: kubectl then computes `kubectl apply`'s strategic merge patches from its
own compiled-in Go types (exactly upstream's merge keys) instead of from these schemas,
whose open parts (`x-kubernetes-preserve-unknown-fields`) it cannot walk.

/openapi/v2 is served in full as JSON. kubectl asks for it only as protobuf
(`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`, which it decodes whatever
the answer's content type) and only where /openapi/v3 has no answer: a kind or a
group-version the simulator does not serve. The protobuf form (a gnostic `Document`)
carries no paths and no schemas, so kubectl's fallback finds nothing to check, skips its
own validation and fails on the kind, as against a real cluster: `no matches for kind
"Deploymint" in version "apps/v1"`.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from typing import Any

import msgspec

from pyccm_sim.kube import protobuf
from pyccm_sim.kube.resources import ALL_RESOURCES, ResourceType
from pyccm_sim.kube.schema import openapi_schema

Obj = dict[str, Any]

_V2_REF = "#/definitions/"
_V3_REF = "#/components/schemas/"
_PATCH_TYPES = (
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
)
_TITLE = {"title": "Kubernetes", "version": "v1.32.0"}
# What kubectl asks for, and what kube-openapi answers with: '@' is not allowed in a
# media type, and Go's mime parser refuses it in a Content-Type.
V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
V2_PROTOBUF_ANSWER = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


@dataclass(frozen=True)
class Operation:
    """One operation of one path: what both documents describe."""

    method: str  # get, post, put, patch, delete
    action: str  # x-kubernetes-action: get, list, post, put, patch, delete, deletecollection
    rtype: ResourceType
    subresource: str = ""

    @property
    def writes(self) -> bool:
        return self.method in ("post", "put", "patch")

    @property
    def operation_id(self) -> str:
        rtype = self.rtype
        words = rtype.group.removesuffix(".k8s.io").split(".") if rtype.group else ["core"]
        group = "".join(word.capitalize() for word in words)
        scope = "Namespaced" if rtype.namespaced else ""
        verb = {"post": "create", "put": "replace", "deletecollection": "deleteCollection"}
        name = verb.get(self.action, self.action)
        suffix = "Status" if self.subresource else ""
        return f"{name}{group}{rtype.version.capitalize()}{scope}{rtype.kind}{suffix}"

    def parameters(self) -> list[Obj]:
        query = ["pretty"]
        if self.writes:
            query += ["dryRun", "fieldManager", "fieldValidation"]
        if self.method == "patch":
            query.append("force")
        return [_query_parameter(name) for name in query]


def _query_parameter(name: str) -> Obj:
    kind = "boolean" if name == "force" else "string"
    return {"name": name, "in": "query", "uniqueItems": True, "schema": {"type": kind}}


def _paths_of(rtype: ResourceType) -> dict[str, list[Operation]]:
    prefix = f"/apis/{rtype.group}/{rtype.version}" if rtype.group else f"/api/{rtype.version}"
    scope = "/namespaces/{namespace}" if rtype.namespaced else ""
    collection = f"{prefix}{scope}/{rtype.plural}"
    item = f"{collection}/{{name}}"
    paths = {
        collection: [
            Operation("get", "list", rtype),
            Operation("post", "post", rtype),
            Operation("delete", "deletecollection", rtype),
        ],
        item: [
            Operation("get", "get", rtype),
            Operation("put", "put", rtype),
            Operation("patch", "patch", rtype),
            Operation("delete", "delete", rtype),
        ],
    }
    if rtype.namespaced:
        paths[f"{prefix}/{rtype.plural}"] = [Operation("get", "list", rtype)]
    if rtype.status_subresource:
        paths[f"{item}/status"] = [
            Operation(method, method, rtype, "status") for method in ("get", "put", "patch")
        ]
    return paths


def _path_parameters(path: str) -> list[Obj]:
    names = [name for name in ("name", "namespace") if f"{{{name}}}" in path]
    return [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in names
    ]


def _gvk(rtype: ResourceType) -> Obj:
    return {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}


def _definitions(served: list[ResourceType], ref_prefix: str) -> dict[str, Obj]:
    definitions: dict[str, Obj] = {}
    for rtype in served:
        openapi_schema(rtype.schema, ref_prefix, definitions)
        definitions[rtype.schema.name]["x-kubernetes-group-version-kind"] = [_gvk(rtype)]
    return definitions


# -- v3 -------------------------------------------------------------------------------------


def _v3_operation(operation: Operation) -> Obj:
    schema = {"$ref": _V3_REF + operation.rtype.schema.name}
    body: Obj = {
        "operationId": operation.operation_id,
        "parameters": operation.parameters(),
        "responses": {
            "200": {"description": "OK", "content": {"application/json": {"schema": schema}}}
        },
        "x-kubernetes-action": operation.action,
        "x-kubernetes-group-version-kind": _gvk(operation.rtype),
    }
    if operation.method == "patch":
        patch = {"schema": {"type": "object"}}
        body["requestBody"] = {"content": dict.fromkeys(_PATCH_TYPES, patch), "required": True}
    elif operation.writes:
        body["requestBody"] = {"content": {"application/json": {"schema": schema}}}
    if operation.method == "post":
        body["responses"]["201"] = body["responses"]["200"]
    return body


def _v3_key(rtype: ResourceType) -> str:
    return f"apis/{rtype.group}/{rtype.version}" if rtype.group else f"api/{rtype.version}"


@functools.cache
def v3_documents() -> dict[str, bytes]:
    """Each group-version's document, encoded, by its index key (`api/v1`, `apis/apps/v1`)."""
    documents = {}
    for key in dict.fromkeys(_v3_key(r) for r in ALL_RESOURCES):
        served = [r for r in ALL_RESOURCES if _v3_key(r) == key]
        paths: Obj = {}
        for rtype in served:
            for path, operations in _paths_of(rtype).items():
                item: Obj = {"parameters": _path_parameters(path)}
                item.update({op.method: _v3_operation(op) for op in operations})
                paths[path] = item
        document = {
            "openapi": "3.0.0",
            "info": _TITLE,
            "paths": paths,
            "components": {"schemas": _definitions(served, _V3_REF)},
        }
        documents[key] = msgspec.json.encode(document)
    return documents


@functools.cache
def v3_index() -> bytes:
    """The discovery document: each group-version's URL, with a hash of its content, which
    clients cache by (upstream's: the SHA-512 of the document, in upper-case hex)."""
    paths = {
        key: {
            "serverRelativeURL": f"/openapi/v3/{key}?hash="
            + hashlib.sha512(document).hexdigest().upper()
        }
        for key, document in v3_documents().items()
    }
    return msgspec.json.encode({"paths": paths})


# -- v2 -------------------------------------------------------------------------------------


def _v2_operation(operation: Operation) -> Obj:
    ref = {"$ref": _V2_REF + operation.rtype.schema.name}
    parameters = [
        {"name": p["name"], "in": "query", "type": p["schema"]["type"], "uniqueItems": True}
        for p in operation.parameters()
    ]
    body: Obj = {
        "operationId": operation.operation_id,
        "produces": ["application/json"],
        "parameters": parameters,
        "responses": {"200": {"description": "OK", "schema": ref}},
        "x-kubernetes-action": operation.action,
        "x-kubernetes-group-version-kind": _gvk(operation.rtype),
    }
    if operation.method == "patch":
        body["consumes"] = list(_PATCH_TYPES)
        parameters.append(
            {"name": "body", "in": "body", "required": True, "schema": {"type": "object"}}
        )
    elif operation.writes:
        body["consumes"] = ["application/json"]
        parameters.append({"name": "body", "in": "body", "required": True, "schema": ref})
    return body


@functools.cache
def v2_protobuf() -> bytes:
    """The gnostic openapi_v2.Document {swagger: "2.0", info: {title, version}}."""
    info = protobuf.field_bytes(1, _TITLE["title"].encode()) + protobuf.field_bytes(
        2, _TITLE["version"].encode()
    )
    return protobuf.field_bytes(1, b"2.0") + protobuf.field_bytes(2, info)


@functools.cache
def v2_document() -> bytes:
    paths: Obj = {}
    for rtype in ALL_RESOURCES:
        for path, operations in _paths_of(rtype).items():
            item: Obj = {
                "parameters": [
                    {"name": p["name"], "in": "path", "required": True, "type": "string"}
                    for p in _path_parameters(path)
                ]
            }
            item.update({op.method: _v2_operation(op) for op in operations})
            paths[path] = item
    document = {
        "swagger": "2.0",
        "info": _TITLE,
        "paths": paths,
        "definitions": _definitions(list(ALL_RESOURCES), _V2_REF),
    }
    return msgspec.json.encode(document)
