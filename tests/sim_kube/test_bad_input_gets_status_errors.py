"""Bad input never crashes the simulator: each gets the Status the real API returns."""

from __future__ import annotations

import pytest

from pyccm_sim.kube.testing import KubeSimHandle
from tests.support.kube_http import http


@pytest.mark.parametrize(
    ("method", "path", "body", "content_type", "code", "reason"),
    [
        ("POST", "/api/v1/nodes", b"{not json", "application/json", 400, "BadRequest"),
        ("POST", "/api/v1/nodes", b"[1, 2]", "application/json", 400, "BadRequest"),
        ("POST", "/api/v1/nodes", b"<node/>", "application/xml", 415, "UnsupportedMediaType"),
        ("PATCH", "/api/v1/nodes/node-0000", b"{}", "text/plain", 415, "UnsupportedMediaType"),
        (
            "PATCH",
            "/api/v1/nodes/node-0000",
            b"{bad",
            "application/merge-patch+json",
            400,
            "BadRequest",
        ),
        (
            "PATCH",
            "/api/v1/nodes/node-0000",
            b"{}",
            "application/json-patch+json",
            400,
            "BadRequest",
        ),
        (
            "PATCH",
            "/api/v1/nodes/node-0000",
            b"[]",
            "application/merge-patch+json",
            400,
            "BadRequest",
        ),
        ("PATCH", "/api/v1/nodes/nope", b"{}", "application/merge-patch+json", 404, "NotFound"),
        (
            "PUT",
            "/api/v1/nodes/node-0000",
            b'{"metadata": {"name": "other"}}',
            "application/json",
            400,
            "BadRequest",
        ),
        ("GET", "/api/v1/nodes?labelSelector=a%20in%20(b", None, "", 400, "BadRequest"),
        ("GET", "/api/v1/nodes?labelSelector=!!x", None, "", 400, "BadRequest"),
        ("GET", "/api/v1/nodes?fieldSelector=spec.providerID%3Dx", None, "", 400, "BadRequest"),
        ("GET", "/api/v1/nodes?limit=many", None, "", 400, "BadRequest"),
        ("GET", "/api/v1/nodes?continue=garbage", None, "", 400, "BadRequest"),
        ("GET", "/api/v1/nodes?resourceVersion=abc", None, "", 400, "BadRequest"),
        ("GET", "/api/v1/widgets", None, "", 404, "NotFound"),
        ("GET", "/apis/batch/v1/jobs", None, "", 404, "NotFound"),
        ("GET", "/api/v1/nodes/node-0000/proxy", None, "", 404, "NotFound"),
        (
            "POST",
            "/api/v1/nodes/node-0000/status",
            b"{}",
            "application/json",
            405,
            "MethodNotAllowed",
        ),
        ("PUT", "/api/v1/nodes", b"{}", "application/json", 405, "MethodNotAllowed"),
    ],
)
def test_bad_requests_get_the_api_servers_status(  # noqa: PLR0917 (parametrized cases)
    kube: KubeSimHandle,
    method: str,
    path: str,
    body: bytes | None,
    content_type: str,
    code: int,
    reason: str,
) -> None:
    reply = http(kube, method, path, body, content_type=content_type)
    status = reply.json()
    assert (reply.status, status["kind"], status["code"], status["reason"]) == (
        code,
        "Status",
        code,
        reason,
    )
    assert http(kube, "GET", "/api/v1/nodes/node-0000").status == 200


def test_an_oversized_body_is_refused(kube: KubeSimHandle) -> None:
    body = (
        b'{"metadata": {"name": "big", "annotations": {"a": "' + b"x" * (4 * 1024 * 1024) + b'"}}}'
    )
    reply = http(kube, "POST", "/api/v1/nodes", body)
    assert (reply.status, reply.json()["reason"]) == (413, "RequestEntityTooLarge")
    assert kube.get("nodes", "big") is None


def test_a_bad_selector_in_a_watch_is_a_bad_request(kube: KubeSimHandle) -> None:
    reply = http(kube, "GET", "/api/v1/nodes?watch=1&labelSelector=%3D%3D")
    assert (reply.status, reply.json()["reason"]) == (400, "BadRequest")
