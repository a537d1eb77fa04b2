"""PATCH in its three flavours, with the merge keys of the upstream Go types and the
status-subresource rules, through the official client (a dict body is sent as a
strategic merge patch, a list as a JSON patch) and raw HTTP for merge patches."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pyccm_sim.kube.patch import PatchError, json_patch, strategic_merge_patch
from pyccm_sim.kube.resources import NODES, SERVICES
from pyccm_sim.kube.testing import KubeSimHandle
from tests.support.kube_http import http


def _node(kube: KubeSimHandle, name: str = "node-0000") -> Any:
    return kube.get("nodes", name)


def test_the_client_sends_dicts_as_strategic_and_lists_as_json_patches(
    kube: KubeSimHandle, core: Any
) -> None:
    core.patch_node("node-0000", {"metadata": {"labels": {"a": "1"}}})
    core.patch_node("node-0000", [{"op": "add", "path": "/metadata/labels/b", "value": "2"}])
    patches = [r["contentType"] for r in kube.requests() if r["verb"] == "patch"]
    assert patches == ["application/strategic-merge-patch+json", "application/json-patch+json"]
    labels = _node(kube)["metadata"]["labels"]
    assert (labels["a"], labels["b"]) == ("1", "2")


def test_node_addresses_merge_by_type(kube: KubeSimHandle, core: Any) -> None:
    core.patch_node_status(
        "node-0000",
        {
            "status": {
                "addresses": [
                    {"type": "InternalIP", "address": "10.9.9.9"},
                    {"type": "ExternalIP", "address": "1.1.1.1"},
                ]
            }
        },
    )
    assert _node(kube)["status"]["addresses"] == [
        {"type": "InternalIP", "address": "10.9.9.9"},
        {"type": "Hostname", "address": "node-0000"},
        {"type": "ExternalIP", "address": "1.1.1.1"},
    ]


def test_set_element_order_orders_a_merged_list(kube: KubeSimHandle, core: Any) -> None:
    core.patch_node_status(
        "node-0000",
        {
            "status": {
                "$setElementOrder/addresses": [{"type": "Hostname"}, {"type": "InternalIP"}],
                "addresses": [{"type": "Hostname", "address": "node-0000"}],
            }
        },
    )
    assert [a["type"] for a in _node(kube)["status"]["addresses"]] == ["Hostname", "InternalIP"]


def test_conditions_merge_by_type(kube: KubeSimHandle, core: Any) -> None:
    condition = {"type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated"}
    core.patch_node_status("node-0000", {"status": {"conditions": [condition]}})
    conditions = _node(kube)["status"]["conditions"]
    assert [c["type"] for c in conditions] == [
        "MemoryPressure",
        "DiskPressure",
        "PIDPressure",
        "Ready",
        "NetworkUnavailable",
    ]


def test_taints_have_no_merge_key_upstream_so_a_patch_replaces_them(
    kube: KubeSimHandle, core: Any
) -> None:
    core.patch_node("node-0000", {"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}})
    assert _node(kube)["spec"]["taints"] == [{"key": "a", "effect": "NoSchedule"}]


def test_a_delete_directive_removes_one_merged_element(kube: KubeSimHandle, core: Any) -> None:
    core.patch_node_status(
        "node-0000", {"status": {"addresses": [{"type": "Hostname", "$patch": "delete"}]}}
    )
    assert [a["type"] for a in _node(kube)["status"]["addresses"]] == ["InternalIP"]


def test_a_replace_directive_replaces_a_merged_list(kube: KubeSimHandle, core: Any) -> None:
    patch = {
        "status": {
            "addresses": [{"$patch": "replace"}, {"type": "ExternalIP", "address": "2.2.2.2"}]
        }
    }
    core.patch_node_status("node-0000", patch)
    assert _node(kube)["status"]["addresses"] == [{"type": "ExternalIP", "address": "2.2.2.2"}]


def test_finalizers_merge_as_a_set(kube: KubeSimHandle, core: Any) -> None:
    core.patch_node("node-0000", {"metadata": {"finalizers": ["a", "b"]}})
    core.patch_node("node-0000", {"metadata": {"finalizers": ["b", "c"]}})
    assert _node(kube)["metadata"]["finalizers"] == ["a", "b", "c"]


def test_service_ports_merge_by_port(kube: KubeSimHandle, core: Any) -> None:
    core.patch_namespaced_service(
        "svc-00000", "default", {"spec": {"ports": [{"port": 80, "name": "web"}]}}
    )
    ports = kube.get("services", "svc-00000", "default")["spec"]["ports"]  # type: ignore[index]
    assert [(p["port"], p["name"]) for p in ports] == [(80, "web"), (443, "https")]


def test_ingress_is_replaced_and_spec_ignored_on_the_status_subresource(
    kube: KubeSimHandle, core: Any
) -> None:
    core.patch_namespaced_service_status(
        "svc-00000",
        "default",
        {"status": {"loadBalancer": {"ingress": [{"ip": "172.24.4.10"}, {"ip": "172.24.4.11"}]}}},
    )
    core.patch_namespaced_service_status(
        "svc-00000",
        "default",
        {
            "spec": {"type": "ClusterIP"},
            "status": {"loadBalancer": {"ingress": [{"ip": "172.24.4.12"}]}},
        },
    )
    service = kube.get("services", "svc-00000", "default")
    assert service is not None
    assert service["status"]["loadBalancer"]["ingress"] == [{"ip": "172.24.4.12"}]
    assert service["spec"]["type"] == "LoadBalancer"


def test_a_status_patch_may_add_a_finalizer_as_upstream_allows(
    kube: KubeSimHandle, core: Any
) -> None:
    finalizer = "service.kubernetes.io/load-balancer-cleanup"
    core.patch_namespaced_service_status(
        "svc-00000", "default", {"metadata": {"finalizers": [finalizer]}}
    )
    assert kube.get("services", "svc-00000", "default")["metadata"]["finalizers"] == [finalizer]  # type: ignore[index]


def test_a_main_resource_write_ignores_status(kube: KubeSimHandle, core: Any) -> None:
    core.patch_namespaced_service(
        "svc-00000", "default", {"status": {"loadBalancer": {"ingress": [{"ip": "9.9.9.9"}]}}}
    )
    assert kube.get("services", "svc-00000", "default")["status"] == {"loadBalancer": {}}  # type: ignore[index]


def test_a_merge_patch_replaces_lists_and_null_deletes(kube: KubeSimHandle) -> None:
    patch = {
        "metadata": {"labels": {"kubernetes.io/os": None}},
        "status": {"addresses": [{"type": "Hostname", "address": "h"}]},
    }
    reply = http(
        kube,
        "PATCH",
        "/api/v1/nodes/node-0000/status",
        json.dumps(patch).encode(),
        content_type="application/merge-patch+json",
    )
    assert reply.status == 200
    node = _node(kube)
    assert node["status"]["addresses"] == [{"type": "Hostname", "address": "h"}]
    assert "kubernetes.io/os" not in node["metadata"]["labels"]


def test_a_patch_with_a_stale_resource_version_conflicts(kube: KubeSimHandle) -> None:
    body = json.dumps({"metadata": {"resourceVersion": "1", "labels": {"x": "y"}}}).encode()
    reply = http(
        kube, "PATCH", "/api/v1/nodes/node-0000", body, content_type="application/merge-patch+json"
    )
    assert (reply.status, reply.json()["reason"]) == (409, "Conflict")


def test_a_failed_json_patch_test_is_invalid(kube: KubeSimHandle) -> None:
    body = json.dumps([{"op": "test", "path": "/spec/podCIDR", "value": "1.2.3.0/24"}]).encode()
    reply = http(
        kube, "PATCH", "/api/v1/nodes/node-0000", body, content_type="application/json-patch+json"
    )
    assert (reply.status, reply.json()["reason"]) == (422, "Invalid")


@pytest.mark.parametrize(
    ("operations", "expected"),
    [
        ([{"op": "add", "path": "/a/-", "value": 3}], {"a": [1, 2, 3], "b": {"c": "d"}}),
        ([{"op": "replace", "path": "/b/c", "value": "e"}], {"a": [1, 2], "b": {"c": "e"}}),
        ([{"op": "move", "from": "/b/c", "path": "/x"}], {"a": [1, 2], "b": {}, "x": "d"}),
        ([{"op": "copy", "from": "/a/0", "path": "/a/0"}], {"a": [1, 1, 2], "b": {"c": "d"}}),
        ([{"op": "remove", "path": "/a/1"}], {"a": [1], "b": {"c": "d"}}),
    ],
)
def test_json_patch_operations(operations: list[dict[str, Any]], expected: dict[str, Any]) -> None:
    assert json_patch({"a": [1, 2], "b": {"c": "d"}}, operations) == expected


def test_json_patch_on_a_missing_path_fails() -> None:
    with pytest.raises(PatchError):
        json_patch({}, [{"op": "replace", "path": "/nope", "value": 1}])


def test_retain_keys_drops_unlisted_fields() -> None:
    patched = strategic_merge_patch(
        {"spec": {"a": 1, "b": 2}}, {"spec": {"$retainKeys": ["b"], "b": 3}}, NODES.merge_lists
    )
    assert patched == {"spec": {"b": 3}}


def test_a_patch_replace_directive_on_a_map() -> None:
    patched = strategic_merge_patch(
        {"spec": {"selector": {"a": "1", "b": "2"}}},
        {"spec": {"selector": {"$patch": "replace", "c": "3"}}},
        SERVICES.merge_lists,
    )
    assert patched == {"spec": {"selector": {"c": "3"}}}
