"""Lists: stable pages over a snapshot, resourceVersion semantics, label and field selectors,
all through the official client or raw HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from pyccm_sim.kube.testing import KubeSimHandle
from tests.support.kube_http import as_json, http


def _names(items: list[dict[str, object]]) -> list[object]:
    return [item["metadata"]["name"] for item in items]  # type: ignore[index]


def test_pages_continue_from_a_snapshot_even_when_objects_change(
    kube: KubeSimHandle, core: Any
) -> None:
    kube.seed(nodes=3)
    first = as_json(core.list_node(limit=2))
    kube.delete("nodes", "node-0003")
    kube.create("nodes", {"metadata": {"name": "node-0002a"}})
    second = as_json(core.list_node(limit=2, _continue=first["metadata"]["continue"]))
    third = as_json(core.list_node(limit=2, _continue=second["metadata"]["continue"]))
    names = _names(first["items"] + second["items"] + third["items"])
    assert names == [f"node-000{i}" for i in range(6)]
    assert first["metadata"]["remainingItemCount"] == 4
    assert "continue" not in third["metadata"]
    assert first["metadata"]["resourceVersion"] == third["metadata"]["resourceVersion"]


def test_a_new_list_sees_the_changes_made_during_pagination(kube: KubeSimHandle, core: Any) -> None:
    kube.delete("nodes", "node-0001")
    assert _names(as_json(core.list_node(limit=500))["items"]) == ["node-0000", "node-0002"]


def test_resource_version_zero_ignores_limit_like_the_watch_cache(kube: KubeSimHandle) -> None:
    body = http(kube, "GET", "/api/v1/nodes?limit=1&resourceVersion=0").json()
    assert len(body["items"]) == 3
    assert "continue" not in body["metadata"]


def test_the_list_resource_version_is_the_latest_write(kube: KubeSimHandle) -> None:
    body = http(kube, "GET", "/api/v1/namespaces/default/services").json()
    assert int(body["metadata"]["resourceVersion"]) == kube.resource_version


@pytest.mark.parametrize(
    "query",
    ["resourceVersionMatch=Exact", "limit=500"],
    ids=["exact", "limit-without-match-is-legacy-exact"],
)
def test_exact_resource_version_lists_the_past(kube: KubeSimHandle, query: str) -> None:
    before = kube.resource_version
    kube.delete("nodes", "node-0000")
    body = http(kube, "GET", f"/api/v1/nodes?resourceVersion={before}&{query}").json()
    assert _names(body["items"]) == ["node-0000", "node-0001", "node-0002"]
    assert body["metadata"]["resourceVersion"] == str(before)


def test_a_not_older_than_resource_version_lists_the_present(kube: KubeSimHandle) -> None:
    before = kube.resource_version
    kube.delete("nodes", "node-0000")
    path = f"/api/v1/nodes?resourceVersion={before}&resourceVersionMatch=NotOlderThan"
    body = http(kube, "GET", path).json()
    assert _names(body["items"]) == ["node-0001", "node-0002"]
    assert body["metadata"]["resourceVersion"] == str(kube.resource_version)


def test_a_future_resource_version_is_a_timeout_status(kube: KubeSimHandle) -> None:
    reply = http(kube, "GET", f"/api/v1/nodes?resourceVersion={kube.resource_version + 100}")
    assert (reply.status, reply.json()["reason"]) == (504, "Timeout")
    assert "Too large resource version" in reply.json()["message"]


def test_items_carry_kind_and_the_list_its_list_kind(kube: KubeSimHandle) -> None:
    body = http(kube, "GET", "/apis/coordination.k8s.io/v1/leases").json()
    assert (body["kind"], body["apiVersion"], body["items"]) == (
        "LeaseList",
        "coordination.k8s.io/v1",
        [],
    )


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("tier=web", ["a", "b"]),
        ("tier==web", ["a", "b"]),
        ("tier!=web", ["c", "d"]),
        ("tier in (db, cache)", ["c"]),
        ("tier notin (web)", ["c", "d"]),
        ("tier", ["a", "b", "c"]),
        ("!tier", ["d"]),
        ("tier=web,zone=z1", ["a"]),
        ("rank>1", ["b"]),
    ],
)
def test_label_selectors_filter_like_the_api_server(
    kube: KubeSimHandle, core: Any, selector: str, expected: list[str]
) -> None:
    labels = {
        "a": {"tier": "web", "zone": "z1", "rank": "1"},
        "b": {"tier": "web", "zone": "z2", "rank": "2"},
        "c": {"tier": "db"},
        "d": {"other": "x"},
    }
    for name, node_labels in labels.items():
        kube.create("nodes", {"metadata": {"name": name, "labels": {**node_labels, "set": "t"}}})
    # "set=t" leaves the seeded nodes out of the negative selectors' results.
    page = as_json(core.list_node(label_selector=f"set=t,{selector}"))
    assert _names(page["items"]) == expected


def test_label_selectors_and_limits_page_together(kube: KubeSimHandle, core: Any) -> None:
    for index in range(5):
        kube.create(
            "nodes", {"metadata": {"name": f"x{index}", "labels": {"pick": str(index % 2)}}}
        )
    seen: list[object] = []
    token = None
    while True:
        page = as_json(core.list_node(label_selector="pick=0", limit=1, _continue=token))
        seen += _names(page["items"])
        token = page["metadata"].get("continue")
        if not token:
            break
    assert seen == ["x0", "x2", "x4"]


def test_field_selectors_pick_services_by_type_and_namespace(
    kube: KubeSimHandle, core: Any
) -> None:
    kube.create(
        "services", {"metadata": {"name": "plain"}, "spec": {"ports": [{"port": 80}]}}, "default"
    )
    lbs = as_json(core.list_service_for_all_namespaces(field_selector="spec.type=LoadBalancer"))
    assert len(lbs["items"]) == 4
    others = as_json(core.list_service_for_all_namespaces(field_selector="spec.type!=LoadBalancer"))
    assert _names(others["items"]) == ["plain"]
    team = as_json(core.list_service_for_all_namespaces(field_selector="metadata.namespace=team-a"))
    assert _names(team["items"]) == ["svc-00001"]


def test_field_selectors_pick_nodes_by_name_and_schedulability(
    kube: KubeSimHandle, core: Any
) -> None:
    core.patch_node("node-0001", {"spec": {"unschedulable": True}})
    assert _names(as_json(core.list_node(field_selector="metadata.name=node-0002"))["items"]) == [
        "node-0002"
    ]
    cordoned = as_json(core.list_node(field_selector="spec.unschedulable=true"))
    assert _names(cordoned["items"]) == ["node-0001"]


def test_a_namespaced_list_only_sees_its_namespace(core: Any) -> None:
    assert _names(as_json(core.list_namespaced_service("team-b"))["items"]) == ["svc-00002"]


def test_the_table_view_serves_kubectl_columns(kube: KubeSimHandle) -> None:
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    body = http(kube, "GET", "/api/v1/nodes", accept=accept).json()
    assert body["kind"] == "Table"
    assert [c["name"] for c in body["columnDefinitions"]][:5] == [
        "Name",
        "Status",
        "Roles",
        "Age",
        "Version",
    ]
    assert body["rows"][0]["cells"][:2] == ["node-0000", "Ready"]
