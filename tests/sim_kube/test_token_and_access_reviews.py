"""TokenReview and SubjectAccessReview: POST-only, answered with `status` filled, decided
by the simulator's tokens and RBAC (the non-resource rules included)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyccm_sim.kube.settings import User
from pyccm_sim.kube.testing import KubeSimHandle, running_kube_sim
from tests.support.kube_http import Reply, http

RBAC = Path(__file__).resolve().parents[2] / "deploy" / "base" / "rbac.yaml"
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
CCM = "system:serviceaccount:kube-system:cloud-controller-manager"
PROMETHEUS = "system:serviceaccount:monitoring:prometheus"

SCRAPERS = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: metrics-reader}
rules:
  - nonResourceURLs: ["/metrics", "/debug/*"]
    verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: metrics-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: metrics-reader}
subjects: [{kind: ServiceAccount, name: prometheus, namespace: monitoring}]
---
# A RoleBinding never grants non-resource URLs, whatever its role says.
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: metrics-reader, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: metrics-reader}
subjects: [{kind: User, name: namespaced-user}]
"""


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[KubeSimHandle]:
    scrapers = tmp_path / "scrapers.yaml"
    scrapers.write_text(SCRAPERS)
    tokens = (
        ("ccm-token", User(CCM)),
        ("prometheus-token", User(PROMETHEUS)),
        ("ops-token", User("alice", ("ops",))),
    )
    with running_kube_sim(rbac_files=(RBAC, scrapers), tokens=tokens) as kube:
        yield kube


def post(kube: KubeSimHandle, path: str, body: dict[str, Any], token: str = "admin") -> Reply:
    return http(kube, "POST", path, json.dumps(body).encode(), token=token)


def token_review(token: str) -> dict[str, Any]:
    return {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token},
    }


def path_review(user: str, groups: list[str], path: str, verb: str = "get") -> dict[str, Any]:
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "groups": groups,
            "nonResourceAttributes": {"path": path, "verb": verb},
        },
    }


def test_a_known_token_is_reviewed_as_its_user_with_the_api_servers_groups(
    guarded: KubeSimHandle,
) -> None:
    reply = post(guarded, TOKEN_REVIEWS, token_review("prometheus-token"), token="ccm-token")
    assert reply.status == 201
    answer = reply.json()
    assert (answer["kind"], answer["apiVersion"]) == (
        "TokenReview",
        "authentication.k8s.io/v1",
    )
    assert answer["status"] == {
        "authenticated": True,
        "user": {
            "username": PROMETHEUS,
            "groups": [
                "system:authenticated",
                "system:serviceaccounts",
                "system:serviceaccounts:monitoring",
            ],
        },
    }
    ops = post(guarded, TOKEN_REVIEWS, token_review("ops-token"), token="ccm-token").json()
    assert ops["status"]["user"]["groups"] == ["ops", "system:authenticated"]


def test_an_unknown_token_is_not_authenticated(guarded: KubeSimHandle) -> None:
    reply = post(guarded, TOKEN_REVIEWS, token_review("nobody-knows"), token="ccm-token")
    assert reply.status == 201
    assert reply.json()["status"] == {"user": {}}


def test_a_token_review_without_a_token_is_a_bad_request(guarded: KubeSimHandle) -> None:
    body = token_review("")
    reply = post(guarded, TOKEN_REVIEWS, body)
    assert (reply.status, reply.json()["message"]) == (
        400,
        "token is required for TokenReview in authentication",
    )


# (user, groups, path, verb) -> allowed
PATH_CASES = [
    ((PROMETHEUS, ["system:serviceaccounts"], "/metrics", "get"), True),
    ((PROMETHEUS, [], "/debug/pprof/heap", "get"), True),  # "/debug/*" is a prefix
    ((PROMETHEUS, [], "/metrics", "post"), False),  # the verb is part of the rule
    ((PROMETHEUS, [], "/healthz", "get"), False),
    (("namespaced-user", [], "/metrics", "get"), False),  # a RoleBinding grants no URL
    (("someone", ["system:masters"], "/anything", "delete"), True),
    ((CCM, ["system:authenticated"], "/metrics", "get"), False),
]


@pytest.mark.parametrize(("case", "allowed"), PATH_CASES)
def test_an_access_review_of_a_path_follows_the_non_resource_rules(
    guarded: KubeSimHandle, case: tuple[str, list[str], str, str], allowed: bool
) -> None:
    user, groups, path, verb = case
    reply = post(guarded, ACCESS_REVIEWS, path_review(user, groups, path, verb), token="ccm-token")
    assert reply.status == 201
    assert reply.json()["status"]["allowed"] is allowed
    assert reply.json()["spec"]["nonResourceAttributes"] == {"path": path, "verb": verb}


def test_an_access_review_of_a_resource_follows_the_resource_rules(
    guarded: KubeSimHandle,
) -> None:
    def allowed(verb: str, resource: str) -> bool:
        body = {
            "kind": "SubjectAccessReview",
            "spec": {
                "user": CCM,
                "resourceAttributes": {"verb": verb, "resource": resource, "name": "n"},
            },
        }
        reply = post(guarded, ACCESS_REVIEWS, body, token="ccm-token")
        assert reply.status == 201, reply.body
        return bool(reply.json()["status"]["allowed"])

    assert allowed("patch", "nodes")
    assert not allowed("delete", "services")


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        (
            {"user": "a"},
            "spec.resourceAttributes",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ),
        (
            {"user": "a", "resourceAttributes": {}, "nonResourceAttributes": {}},
            "spec.nonResourceAttributes",
            "cannot be specified in combination with resourceAttributes",
        ),
        (
            {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}},
            "spec.user",
            "at least one of user or group must be specified",
        ),
    ],
)
def test_a_malformed_access_review_is_invalid(
    guarded: KubeSimHandle, spec: dict[str, Any], field: str, message: str
) -> None:
    reply = post(guarded, ACCESS_REVIEWS, {"kind": "SubjectAccessReview", "spec": spec})
    assert (reply.status, reply.json()["reason"]) == (422, "Invalid")
    causes = reply.json()["details"]["causes"]
    assert [(cause["field"], cause["message"]) for cause in causes] == [(field, message)]


def test_the_ccm_service_account_may_create_reviews_and_nobody_else_may(
    guarded: KubeSimHandle,
) -> None:
    # deploy/base/rbac.yaml binds system:auth-delegator, which the API server has from the start.
    assert post(guarded, TOKEN_REVIEWS, token_review("x"), token="ccm-token").status == 201
    body = path_review("u", [], "/metrics")
    assert post(guarded, ACCESS_REVIEWS, body, token="ccm-token").status == 201
    refused = post(guarded, TOKEN_REVIEWS, token_review("x"), token="prometheus-token")
    assert (refused.status, refused.json()["reason"]) == (403, "Forbidden")
    assert (
        'cannot create resource "tokenreviews" in API group "authentication.k8s.io"'
        in (refused.json()["message"])
    )
    assert post(guarded, ACCESS_REVIEWS, body, token="prometheus-token").status == 403


def test_reviews_are_post_only_and_logged_as_creates(guarded: KubeSimHandle) -> None:
    reply = http(guarded, "GET", TOKEN_REVIEWS)
    assert (reply.status, reply.json()["reason"]) == (405, "MethodNotAllowed")
    post(guarded, TOKEN_REVIEWS, token_review("x"))
    record = guarded.requests()[-1]
    assert (record["verb"], record["resource"], record["code"]) == ("create", "tokenreviews", 201)


def test_without_rbac_every_access_review_is_allowed(kube: KubeSimHandle) -> None:
    reply = post(kube, ACCESS_REVIEWS, path_review("anyone", [], "/metrics"))
    assert reply.json()["status"]["allowed"] is True
