"""The knobs fault drills turn: error rates per verb, throttling with Retry-After, cut
watches, forced 410s, and the admin endpoint that turns them from another process."""

from __future__ import annotations

import json
import threading

from pyccm_sim.kube.testing import KubeSimHandle
from tests.support.kube_http import http, watch_lines


def test_an_error_rate_fails_only_its_verb(kube: KubeSimHandle) -> None:
    kube.set_faults(error_rates={"patch": 1.0})
    reply = http(
        kube, "PATCH", "/api/v1/nodes/node-0000", b"{}", content_type="application/merge-patch+json"
    )
    assert (reply.status, reply.json()["reason"]) == (500, "InternalError")
    assert http(kube, "GET", "/api/v1/nodes/node-0000").status == 200


def test_throttling_answers_429_with_retry_after(kube: KubeSimHandle) -> None:
    kube.set_faults(throttle_rate=1.0, retry_after=7)
    reply = http(kube, "GET", "/api/v1/nodes")
    assert (reply.status, reply.headers["Retry-After"]) == (429, "7")
    assert reply.json()["details"]["retryAfterSeconds"] == 7
    kube.set_faults(throttle_rate=0.0)
    assert http(kube, "GET", "/api/v1/nodes").status == 200


def test_expired_watches_get_a_410_error_event_once(kube: KubeSimHandle) -> None:
    kube.expire_next_watches(1)
    path = f"/api/v1/nodes?watch=1&resourceVersion={kube.resource_version}&timeoutSeconds=1"
    first = watch_lines(kube, path)
    assert [(e["type"], e["object"]["code"]) for e in first] == [("ERROR", 410)]
    assert watch_lines(kube, path) == []


def test_cutting_watches_ends_open_streams(kube: KubeSimHandle) -> None:
    result: list[list[dict[str, object]]] = []
    reader = threading.Thread(
        target=lambda: result.append(watch_lines(kube, "/api/v1/nodes?watch=1&timeoutSeconds=60"))
    )
    reader.start()
    kube.wait_for("nodes", "node-0000", lambda _: kube.open_watches() == 1)
    assert kube.cut_watches() == 1
    reader.join(timeout=10)
    assert not reader.is_alive()
    assert len(result[0]) == 3  # the synthetic ADDED events, then a clean end
    assert kube.open_watches() == 0


def test_the_admin_endpoint_turns_knobs_and_needs_the_admin_token(kube: KubeSimHandle) -> None:
    body = json.dumps({"errorRates": {"create": 1.0}, "latency": 0.0}).encode()
    assert http(kube, "POST", "/_sim/faults", body, token="someone").status == 401
    assert http(kube, "POST", "/_sim/faults", body).json()["errorRates"] == {"create": 1.0}
    assert http(kube, "POST", "/api/v1/nodes", b'{"metadata": {"name": "x"}}').status == 500


def test_the_admin_endpoint_seeds_flips_nodes_and_reports_state(kube: KubeSimHandle) -> None:
    http(kube, "POST", "/_sim/seed", json.dumps({"nodes": 2, "services": 1}).encode())
    http(
        kube, "POST", "/_sim/kubelet", json.dumps({"node": "node-0004", "ready": "False"}).encode()
    )
    state = http(kube, "GET", "/_sim/state").json()
    assert (state["objects"]["nodes"], state["objects"]["services"]) == (5, 5)
    node = http(kube, "GET", "/_sim/objects/nodes/node-0004").json()
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False"


def test_the_request_log_is_read_from_a_mark_even_after_old_records_fell_off(
    kube: KubeSimHandle,
) -> None:
    mark = http(kube, "GET", "/_sim/state").json()["requests"]
    http(kube, "GET", "/api/v1/nodes")
    http(kube, "GET", "/api/v1/namespaces/default/services")
    records = http(kube, "GET", f"/_sim/requests?since={mark}").json()
    assert [(r["seq"], r["path"]) for r in records] == [
        (mark, "/api/v1/nodes"),
        (mark + 1, "/api/v1/namespaces/default/services"),
    ]


def test_bad_admin_requests_are_status_errors(kube: KubeSimHandle) -> None:
    assert http(kube, "POST", "/_sim/faults", b"{oops").status == 400
    assert http(kube, "POST", "/_sim/faults", b'{"errorRates": {"fly": 1}}').status == 400
    assert http(kube, "POST", "/_sim/kubelet", b'{"node": "nope"}').status == 404
    assert http(kube, "POST", "/_sim/nothing", b"{}").status == 404
