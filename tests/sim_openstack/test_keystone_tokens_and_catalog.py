"""Keystone: discovery, the three auth methods, the catalog, 401s and re-authentication."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from openstack import exceptions as sdk_exceptions

from pyccm_sim.openstack.testing import OpenStackSimHandle


def _password_body(sim: OpenStackSimHandle, password: str) -> dict[str, Any]:
    creds = sim.credentials
    user = {"name": creds.username, "domain": {"name": "Default"}, "password": password}
    project = {"name": creds.project_name, "domain": {"id": "default"}}
    return {
        "auth": {
            "identity": {"methods": ["password"], "password": {"user": user}},
            "scope": {"project": project},
        }
    }


def test_identity_root_lists_v3_and_v3_root_describes_itself(sim: OpenStackSimHandle) -> None:
    root = requests.get(f"{sim.url}/identity/", timeout=5)
    v3 = requests.get(f"{sim.url}/identity/v3", timeout=5)

    assert root.status_code == 300
    assert root.json()["versions"]["values"][0]["id"] == "v3.14"
    assert v3.status_code == 200
    assert v3.json()["version"]["links"][0]["href"] == f"{sim.url}/identity/v3/"


def test_password_auth_returns_subject_token_and_catalog_with_three_interfaces(
    sim: OpenStackSimHandle,
) -> None:
    answer = requests.post(
        f"{sim.url}/identity/v3/auth/tokens",
        json=_password_body(sim, sim.credentials.password),
        timeout=5,
    )

    assert answer.status_code == 201
    assert answer.headers["X-Subject-Token"]
    token = answer.json()["token"]
    assert token["expires_at"].endswith("Z")
    catalog = {entry["type"]: entry for entry in token["catalog"]}
    assert set(catalog) == {"identity", "compute", "network", "load-balancer"}
    for entry in catalog.values():
        assert {e["interface"] for e in entry["endpoints"]} == {"public", "internal", "admin"}
        assert {e["region_id"] for e in entry["endpoints"]} == {"RegionOne"}
    assert catalog["compute"]["endpoints"][0]["url"] == f"{sim.url}/compute/v2.1"


def test_wrong_password_is_401_with_keystone_error_and_no_secret_in_the_call_log(
    sim: OpenStackSimHandle,
) -> None:
    answer = requests.post(
        f"{sim.url}/identity/v3/auth/tokens",
        json=_password_body(sim, "not-the-password"),
        timeout=5,
    )

    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == 401
    assert answer.json()["error"]["title"] == "Unauthorized"
    logged = " ".join(call.path for call in sim.calls())
    assert "not-the-password" not in logged
    assert sim.credentials.password not in logged


def test_sdk_connection_with_wrong_password_fails_with_unauthorized(
    sim: OpenStackSimHandle,
) -> None:
    conn = sim.connection(auth={"password": "wrong"})

    with pytest.raises(sdk_exceptions.SDKException, match="HTTP 401"):
        conn.authorize()


def test_application_credential_cloud_authenticates_and_lists_servers(
    sim: OpenStackSimHandle,
) -> None:
    conn = sim.connection(cloud=sim.appcred_cloud_name)

    names = {server.name for server in conn.compute.servers()}

    assert "node-0000" in names


def test_application_credential_by_name_needs_the_user(sim: OpenStackSimHandle) -> None:
    creds = sim.credentials
    section = {
        "name": creds.app_credential_name,
        "secret": creds.app_credential_secret,
        "user": {"name": creds.username, "domain": {"id": "default"}},
    }
    body = {
        "auth": {
            "identity": {"methods": ["application_credential"], "application_credential": section}
        }
    }
    without_user = {
        "auth": {
            "identity": {
                "methods": ["application_credential"],
                "application_credential": {**section, "user": None},
            }
        }
    }

    good = requests.post(f"{sim.url}/identity/v3/auth/tokens", json=body, timeout=5)
    bad = requests.post(f"{sim.url}/identity/v3/auth/tokens", json=without_user, timeout=5)

    assert good.status_code == 201
    assert good.json()["token"]["project"]["name"] == creds.project_name
    assert bad.status_code == 401


def test_token_method_exchanges_a_valid_token_for_a_new_one(sim: OpenStackSimHandle) -> None:
    first = requests.post(
        f"{sim.url}/identity/v3/auth/tokens",
        json=_password_body(sim, sim.credentials.password),
        timeout=5,
    )
    body = {
        "auth": {
            "identity": {"methods": ["token"], "token": {"id": first.headers["X-Subject-Token"]}}
        }
    }

    second = requests.post(f"{sim.url}/identity/v3/auth/tokens", json=body, timeout=5)

    assert second.status_code == 201
    assert second.headers["X-Subject-Token"] != first.headers["X-Subject-Token"]
    assert "catalog" in second.json()["token"]


def test_unknown_token_gets_401_from_every_service(sim: OpenStackSimHandle) -> None:
    headers = {"X-Auth-Token": "gAAAAAnot-a-token"}
    paths = [
        "/compute/v2.1/servers",
        "/network/v2.0/ports",
        "/load-balancer/v2/lbaas/loadbalancers",
    ]

    statuses = [
        requests.get(sim.url + path, headers=headers, timeout=5).status_code for path in paths
    ]

    assert statuses == [401, 401, 401]


def test_sdk_reauthenticates_after_tokens_are_revoked(sim: OpenStackSimHandle) -> None:
    conn = sim.connection()
    list(conn.compute.servers())
    sim.revoke_tokens()
    mark = sim.mark()

    names = [server.name for server in conn.compute.servers()]

    calls = [(c.method, c.path.split("?")[0], c.status) for c in sim.calls(since=mark)]
    assert names
    assert ("GET", "/compute/v2.1/servers/detail", 401) in calls
    assert ("POST", "/identity/v3/auth/tokens", 201) in calls
    assert calls[-1] == ("GET", "/compute/v2.1/servers/detail", 200)


def test_expired_tokens_are_refused() -> None:
    from pyccm_sim.openstack.testing import running_openstack_sim

    with running_openstack_sim(seed_nodes=1, token_ttl_s=0.0) as short_lived:
        issued = requests.post(
            f"{short_lived.url}/identity/v3/auth/tokens",
            json=_password_body(short_lived, short_lived.credentials.password),
            timeout=5,
        )
        token = issued.headers["X-Subject-Token"]

        answer = requests.get(
            f"{short_lived.url}/compute/v2.1/servers", headers={"X-Auth-Token": token}, timeout=5
        )

    assert issued.status_code == 201
    assert answer.status_code == 401


def test_project_by_id_and_trust_scopes_are_accepted(sim: OpenStackSimHandle) -> None:
    first = requests.post(
        f"{sim.url}/identity/v3/auth/tokens",
        json=_password_body(sim, sim.credentials.password),
        timeout=5,
    )
    project_id = first.json()["token"]["project"]["id"]
    user = {"id": first.json()["token"]["user"]["id"], "password": sim.credentials.password}
    identity = {"methods": ["password"], "password": {"user": user}}

    by_id = requests.post(
        f"{sim.url}/identity/v3/auth/tokens",
        timeout=5,
        json={"auth": {"identity": identity, "scope": {"project": {"id": project_id}}}},
    )
    trust = requests.post(
        f"{sim.url}/identity/v3/auth/tokens",
        timeout=5,
        json={
            "auth": {
                "identity": identity,
                "scope": {"OS-TRUST:trust": {"id": sim.credentials.trust_id}},
            }
        },
    )
    bad_trust = requests.post(
        f"{sim.url}/identity/v3/auth/tokens",
        timeout=5,
        json={"auth": {"identity": identity, "scope": {"OS-TRUST:trust": {"id": "nope"}}}},
    )

    assert by_id.status_code == 201
    assert trust.status_code == 201
    assert trust.json()["token"]["project"]["id"] == project_id
    assert bad_trust.status_code == 401
