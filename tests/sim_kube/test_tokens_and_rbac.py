"""Bearer tokens and, when loaded, RBAC from the CCM's own manifest (deploy/base/rbac.yaml)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pyccm_sim.kube.auth import parse_token_file
from pyccm_sim.kube.settings import User
from pyccm_sim.kube.testing import KubeSimHandle, running_kube_sim
from tests.support.kube_http import http

RBAC = Path(__file__).resolve().parents[2] / "deploy" / "base" / "rbac.yaml"
CCM_TOKEN = "ccm-token"
NOBODY_TOKEN = "nobody-token"


@pytest.fixture
def guarded() -> Iterator[KubeSimHandle]:
    tokens = (
        (CCM_TOKEN, User("system:serviceaccount:kube-system:cloud-controller-manager")),
        (NOBODY_TOKEN, User("nobody")),
    )
    with running_kube_sim(seed_nodes=1, seed_services=1, rbac_files=(RBAC,), tokens=tokens) as kube:
        yield kube


def test_a_request_without_a_token_is_unauthorized(kube: KubeSimHandle) -> None:
    reply = http(kube, "GET", "/api/v1/nodes", token=None)
    assert (reply.status, reply.json()["reason"], reply.json()["message"]) == (
        401,
        "Unauthorized",
        "Unauthorized",
    )


def test_a_wrong_token_is_unauthorized(kube: KubeSimHandle) -> None:
    assert http(kube, "GET", "/api", token="wrong").status == 401


def test_health_and_version_need_no_token(kube: KubeSimHandle) -> None:
    assert http(kube, "GET", "/healthz", token=None).body == b"ok"
    assert http(kube, "GET", "/version", token=None).json()["major"] == "1"


def test_the_ccm_service_account_may_do_what_upstream_grants(guarded: KubeSimHandle) -> None:
    patch = b'{"status": {"addresses": [{"type": "ExternalIP", "address": "1.1.1.1"}]}}'
    reply = http(
        guarded,
        "PATCH",
        "/api/v1/nodes/node-0000/status",
        patch,
        content_type="application/strategic-merge-patch+json",
        token=CCM_TOKEN,
    )
    assert reply.status == 200
    assert http(guarded, "GET", "/api/v1/services", token=CCM_TOKEN).status == 200


def test_the_ccm_service_account_may_not_get_one_service(guarded: KubeSimHandle) -> None:
    reply = http(guarded, "GET", "/api/v1/namespaces/default/services/svc-00000", token=CCM_TOKEN)
    assert (reply.status, reply.json()["reason"]) == (403, "Forbidden")
    assert reply.json()["message"] == (
        'services "svc-00000" is forbidden: User "system:serviceaccount:kube-system:'
        'cloud-controller-manager" cannot get resource "services" in API group "" '
        'in the namespace "default"'
    )


def test_the_status_subresource_needs_its_own_rule(guarded: KubeSimHandle) -> None:
    reply = http(
        guarded,
        "PUT",
        "/api/v1/nodes/node-0000/status",
        b'{"metadata": {"name": "node-0000"}}',
        token=CCM_TOKEN,
    )
    assert reply.status == 403
    assert 'cannot update resource "nodes/status"' in reply.json()["message"]


def test_an_unbound_user_is_denied_and_the_admin_is_not(guarded: KubeSimHandle) -> None:
    assert http(guarded, "GET", "/api/v1/nodes", token=NOBODY_TOKEN).status == 403
    assert http(guarded, "GET", "/api/v1/nodes").status == 200


def test_leases_are_allowed_for_election_but_not_deletion(guarded: KubeSimHandle) -> None:
    body = b'{"metadata": {"name": "cloud-controller-manager"}}'
    path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
    assert http(guarded, "POST", path, body, token=CCM_TOKEN).status == 201
    reply = http(guarded, "DELETE", f"{path}/cloud-controller-manager", token=CCM_TOKEN)
    assert reply.status == 403
    assert 'in API group "coordination.k8s.io"' in reply.json()["message"]


def test_a_token_file_maps_tokens_to_users_and_groups() -> None:
    rows = parse_token_file('t1,alice,1\nt2,bob,2,"ops,dev"\n')
    assert rows == [("t1", User("alice")), ("t2", User("bob", ("ops", "dev")))]
