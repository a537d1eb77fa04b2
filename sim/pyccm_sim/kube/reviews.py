"""TokenReview and SubjectAccessReview, as kube-apiserver answers them.

A component that delegates authentication and authorization to the API server (pyccm's
manager on its HTTPS port, upstream's CCM) asks two questions: who does this bearer token
belong to, and may this user do this? Both are POSTs of a review object that is never
stored: the answer is the same object with its `status` filled, code 201.

- `TokenReview` (authentication.k8s.io/v1): the simulator's own tokens decide (the admin,
  the static token file, users added by tests); the user comes back with the groups the
  API server gives it (`system:authenticated`, and the ServiceAccount groups for
  `system:serviceaccount:<ns>:<name>`). An unknown token is `authenticated: false`.
- `SubjectAccessReview` (authorization.k8s.io/v1): the loaded RBAC decides, for the user
  and groups as sent; `nonResourceAttributes` ask about a path (`/metrics`, verb `get`),
  `resourceAttributes` about a resource. Without RBAC every review is allowed (as
  `--authorization-mode=AlwaysAllow`).

Creating either needs the `create` verb on it (`system:auth-delegator`); malformed reviews
get the API server's 400 and 422 answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from pyccm_sim.kube import errors
from pyccm_sim.kube.auth import Authorizer, Request, effective_groups
from pyccm_sim.kube.settings import User

if TYPE_CHECKING:
    from pyccm_sim.kube.server import KubeSim

Obj = dict[str, Any]

AUTHENTICATION = "authentication.k8s.io"
AUTHORIZATION = "authorization.k8s.io"
# path -> (API group, plural, kind)
PATHS: dict[str, tuple[str, str, str]] = {
    f"/apis/{AUTHENTICATION}/v1/tokenreviews": (AUTHENTICATION, "tokenreviews", "TokenReview"),
    f"/apis/{AUTHORIZATION}/v1/subjectaccessreviews": (
        AUTHORIZATION,
        "subjectaccessreviews",
        "SubjectAccessReview",
    ),
}


async def serve(
    sim: KubeSim, request: web.Request, path: str, user: User, record: Obj
) -> web.Response:
    """Answer a review POSTed to `path` (one of PATHS) by `user`."""
    from pyccm_sim.kube.server import json_response, read_object

    group, plural, kind = PATHS[path]
    record.update(verb="create", resource=plural, namespace="", name="")
    if request.method != "POST":
        raise errors.method_not_allowed()
    if sim.authorizer is not None:
        sim.authorizer.check(Request(user, "create", group, plural, "", ""))
    sim._inject_error("create")  # the `create` error-rate knob fails reviews too
    body = await read_object(request, sim.settings.max_body_bytes)
    if body.get("kind", kind) != kind:
        raise errors.bad_request(f"the body is a {body.get('kind')!r}, not a {kind}")
    if kind == "TokenReview":
        status = token_review_status(sim.tokens, _spec(body))
    else:
        status = access_review_status(sim.authorizer, _spec(body))
    answer = {
        "kind": kind,
        "apiVersion": f"{group}/v1",
        "metadata": {"creationTimestamp": None},
        "spec": body.get("spec") or {},
        "status": status,
    }
    return json_response(answer, 201)


def _spec(body: Obj) -> Obj:
    spec = body.get("spec")
    if not isinstance(spec, dict):
        raise errors.bad_request("spec: must be an object")
    return spec


def token_review_status(tokens: dict[str, User], spec: Obj) -> Obj:
    token = spec.get("token")
    if not isinstance(token, str) or not token:
        raise errors.bad_request("token is required for TokenReview in authentication")
    user = tokens.get(token)
    if user is None:
        return {"user": {}}
    extra = sorted(effective_groups(user) - set(user.groups))
    status: Obj = {
        "authenticated": True,
        "user": {"username": user.name, "groups": [*user.groups, *extra]},
    }
    if audiences := spec.get("audiences"):
        status["audiences"] = audiences
    return status


def access_review_status(authorizer: Authorizer | None, spec: Obj) -> Obj:
    _validate_access_spec(spec)
    if authorizer is None:
        return {"allowed": True}
    name = str(spec.get("user") or "")
    groups = frozenset(str(g) for g in spec.get("groups") or [])
    if (path_attributes := spec.get("nonResourceAttributes")) is not None:
        allowed = authorizer.allows_path(
            name, groups, str(path_attributes.get("path", "")), str(path_attributes.get("verb", ""))
        )
    else:
        attributes = spec["resourceAttributes"]
        resource = str(attributes.get("resource", ""))
        if subresource := attributes.get("subresource"):
            resource = f"{resource}/{subresource}"
        allowed = authorizer.allows(
            Request(
                User(name),
                str(attributes.get("verb", "")),
                str(attributes.get("group", "")),
                resource,
                str(attributes.get("namespace", "")),
                str(attributes.get("name", "")),
            ),
            groups,
        )
    return {"allowed": True, "reason": "RBAC: allowed"} if allowed else {"allowed": False}


def _validate_access_spec(spec: Obj) -> None:
    """kube-apiserver's ValidateSubjectAccessReviewSpec, its 422 causes and words."""
    causes: list[tuple[str, str, str]] = []
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if resource is not None and non_resource is not None:
        causes.append(
            (
                "spec.nonResourceAttributes",
                "FieldValueInvalid",
                "cannot be specified in combination with resourceAttributes",
            )
        )
    if resource is None and non_resource is None:
        causes.append(
            (
                "spec.resourceAttributes",
                "FieldValueRequired",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )
        )
    for attributes in (resource, non_resource):
        if attributes is not None and not isinstance(attributes, dict):
            raise errors.bad_request("spec: attributes must be objects")
    if not spec.get("user") and not spec.get("groups"):
        causes.append(
            ("spec.user", "FieldValueInvalid", "at least one of user or group must be specified")
        )
    if causes:
        raise errors.invalid("SubjectAccessReview", "", AUTHORIZATION, causes)
