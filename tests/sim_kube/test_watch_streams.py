"""Watches: chunked JSON lines, history replay from a resourceVersion, bookmarks,
timeouts, 410 Expired outside the retained window, selectors that objects enter and leave."""

from __future__ import annotations

from typing import Any

from pyccm_sim.kube.testing import KubeSimHandle
from tests.support.kube_http import http, watch, watch_lines


def _events(lines: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"].get("name", "")) for e in lines]


def test_a_watch_replays_every_change_after_its_resource_version(kube: KubeSimHandle) -> None:
    start = kube.resource_version
    kube.create("nodes", {"metadata": {"name": "new"}})
    kube.set_node_ready("node-0000", False)
    kube.delete("nodes", "node-0001")
    lines = watch_lines(kube, f"/api/v1/nodes?watch=true&resourceVersion={start}&timeoutSeconds=1")
    assert _events(lines) == [("ADDED", "new"), ("MODIFIED", "node-0000"), ("DELETED", "node-0001")]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in lines]
    assert versions == sorted(versions)
    assert versions[-1] == kube.resource_version


def test_a_watch_without_resource_version_starts_with_synthetic_adds(kube: KubeSimHandle) -> None:
    lines = watch_lines(kube, "/api/v1/namespaces/team-a/services?watch=1&timeoutSeconds=1")
    assert _events(lines) == [("ADDED", "svc-00001")]


def test_the_official_client_resumes_from_the_last_event(kube: KubeSimHandle, core: Any) -> None:
    listed = core.list_node()
    kube.set_node_ready("node-0002", False)
    stream = watch.Watch().stream(
        core.list_node, resource_version=listed.metadata.resource_version, timeout_seconds=1
    )
    seen = [(e["type"], e["raw_object"]["metadata"]["name"]) for e in stream]
    assert seen == [("MODIFIED", "node-0002")]


def test_bookmarks_carry_the_current_resource_version(kube: KubeSimHandle) -> None:
    start = kube.resource_version
    path = (
        f"/api/v1/nodes?watch=1&allowWatchBookmarks=true&resourceVersion={start}&timeoutSeconds=1"
    )
    lines = watch_lines(kube, path)
    bookmarks = [e for e in lines if e["type"] == "BOOKMARK"]
    assert bookmarks
    assert bookmarks[-1]["object"]["kind"] == "Node"
    assert bookmarks[-1]["object"]["metadata"]["resourceVersion"] == str(kube.resource_version)


def test_no_bookmarks_unless_asked(kube: KubeSimHandle) -> None:
    path = f"/api/v1/nodes?watch=1&resourceVersion={kube.resource_version}&timeoutSeconds=1"
    assert watch_lines(kube, path) == []


def test_a_compacted_resource_version_gets_an_expired_error_event(kube: KubeSimHandle) -> None:
    start = kube.resource_version
    kube.set_history_size(2)
    for index in range(3):
        kube.create("nodes", {"metadata": {"name": f"n{index}"}})
    lines = watch_lines(kube, f"/api/v1/nodes?watch=1&resourceVersion={start}&timeoutSeconds=1")
    assert [e["type"] for e in lines] == ["ERROR"]
    status = lines[0]["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    assert status["message"].startswith(f"too old resource version: {start}")


def test_a_paginated_list_outside_the_window_is_gone(kube: KubeSimHandle) -> None:
    first = http(kube, "GET", "/api/v1/nodes?limit=1").json()
    kube.set_history_size(1)
    kube.set_node_ready("node-0001", False)
    kube.set_node_ready("node-0002", False)
    reply = http(kube, "GET", f"/api/v1/nodes?limit=1&continue={first['metadata']['continue']}")
    assert (reply.status, reply.json()["reason"]) == (410, "Expired")


def test_objects_entering_and_leaving_a_selector_are_added_and_deleted(
    kube: KubeSimHandle, core: Any
) -> None:
    start = kube.resource_version
    core.patch_node("node-0000", {"metadata": {"labels": {"pool": "blue"}}})
    core.patch_node("node-0000", {"metadata": {"labels": {"color": "x"}}})
    core.patch_node("node-0000", {"metadata": {"labels": {"pool": None}}})
    path = (
        f"/api/v1/nodes?watch=1&labelSelector=pool%3Dblue&resourceVersion={start}&timeoutSeconds=1"
    )
    assert _events(watch_lines(kube, path)) == [
        ("ADDED", "node-0000"),
        ("MODIFIED", "node-0000"),
        ("DELETED", "node-0000"),
    ]


def test_a_watch_of_one_object_by_name(kube: KubeSimHandle) -> None:
    start = kube.resource_version
    kube.set_node_ready("node-0000", False)
    kube.set_node_ready("node-0001", False)
    path = (
        "/api/v1/nodes?watch=1&fieldSelector=metadata.name%3Dnode-0001"
        f"&resourceVersion={start}&timeoutSeconds=1"
    )
    assert _events(watch_lines(kube, path)) == [("MODIFIED", "node-0001")]


def test_a_watch_is_a_chunked_json_stream(kube: KubeSimHandle) -> None:
    reply = http(kube, "GET", "/api/v1/nodes?watch=1&timeoutSeconds=1")
    assert reply.headers["Transfer-Encoding"] == "chunked"
    assert reply.headers["Content-Type"].startswith("application/json")
    assert reply.body.endswith(b"}\n")


def test_deleted_events_carry_the_deletions_resource_version(kube: KubeSimHandle) -> None:
    start = kube.resource_version
    kube.delete("services", "svc-00000", "default")
    lines = watch_lines(kube, f"/api/v1/services?watch=1&resourceVersion={start}&timeoutSeconds=1")
    assert [e["type"] for e in lines] == ["DELETED"]
    assert lines[0]["object"]["metadata"]["resourceVersion"] == str(kube.resource_version)
