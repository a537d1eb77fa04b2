"""Lists once the history has moved past a resourceVersion: a list of the current state is
stamped with the current version, so the watch a client opens from it can resume (a stale
stamp makes every relist's watch 410 at once, a relist storm); only an exact read of a
compacted version is 410 Expired, with etcd's message, as on a real API server."""

from __future__ import annotations

import pytest

from pyccm_sim.kube.testing import KubeSimHandle
from tests.support.kube_http import http, watch_lines

NODES = ["node-0000", "node-0001", "node-0002"]


@pytest.fixture
def compacted(kube: KubeSimHandle) -> str:
    """The resourceVersion of a node list that writes elsewhere have since pushed out of a
    two-change history (as lease renewals do on a real cluster) while the nodes stayed put."""
    version: str = http(kube, "GET", "/api/v1/nodes").json()["metadata"]["resourceVersion"]
    kube.set_history_size(2)
    for index in range(5):
        kube.create("namespaces", {"metadata": {"name": f"busy-{index}"}})
    return version


@pytest.mark.parametrize(
    "query",
    [
        "",
        "?limit=500",
        "?resourceVersion=0",
        "?resourceVersion={version}",
        "?resourceVersion={version}&resourceVersionMatch=NotOlderThan",
    ],
    ids=["latest", "paginated", "any", "compacted", "not-older-than-compacted"],
)
def test_a_list_after_compaction_is_the_current_state_at_the_current_version(
    kube: KubeSimHandle, compacted: str, query: str
) -> None:
    reply = http(kube, "GET", "/api/v1/nodes" + query.format(version=compacted))
    assert reply.status == 200, reply.body
    body = reply.json()
    assert body["metadata"]["resourceVersion"] == str(kube.resource_version)
    assert [item["metadata"]["name"] for item in body["items"]] == NODES


def test_a_watch_from_a_relist_after_compaction_resumes_instead_of_expiring(
    kube: KubeSimHandle, compacted: str
) -> None:
    relisted = http(kube, "GET", "/api/v1/nodes?limit=500").json()["metadata"]["resourceVersion"]
    kube.set_node_ready("node-0001", False)
    path = f"/api/v1/nodes?watch=1&resourceVersion={relisted}&timeoutSeconds=1"
    events = [(e["type"], e["object"]["metadata"].get("name")) for e in watch_lines(kube, path)]
    assert events == [("MODIFIED", "node-0001")]


@pytest.mark.parametrize(
    "query",
    ["resourceVersionMatch=Exact", "limit=1"],
    ids=["exact", "limit-without-match-is-legacy-exact"],
)
def test_an_exact_list_of_a_compacted_version_is_expired(
    kube: KubeSimHandle, compacted: str, query: str
) -> None:
    reply = http(kube, "GET", f"/api/v1/nodes?resourceVersion={compacted}&{query}")
    status = reply.json()
    assert (reply.status, status["kind"], status["reason"]) == (410, "Status", "Expired")
    assert status["message"] == "The resourceVersion for the provided list is too old."
