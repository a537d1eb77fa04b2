"""The pieces of the cloud API discipline that need no cloud (the token bucket's are
tests/pacing's): Retry-After parsing, the Octavia version list, the Keystone token requests."""

from __future__ import annotations

import pytest

from pyccm.provider.errors import ConfigError
from pyccm.provider.openstack.common.features import OctaviaFeatures, parse_version_list
from pyccm.provider.openstack.config import GlobalSettings
from pyccm.provider.openstack.transport.client import retry_after_seconds
from pyccm.provider.openstack.transport.connection import auth_method


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("7", 7.0), (None, None), ("soon", None), ("Sat, 21 Nov 2026 06:00:30 GMT", 30.0)],
)
def test_retry_after_is_seconds_or_an_http_date(header: str | None, seconds: float | None) -> None:
    now = 1795240800.0  # Sat, 21 Nov 2026 06:00:00 GMT
    assert retry_after_seconds(header, now=now) == seconds


def test_the_octavia_version_is_the_last_entry_of_its_list() -> None:
    body = b'{"versions": [{"id": "v2.0"}, {"id": "v2.5"}, {"id": "v2.27", "status": "CURRENT"}]}'

    assert parse_version_list(body) == (2, 27)
    assert parse_version_list(b'{"versions": {"values": [{"id": "v2.4"}]}}') == (2, 4)
    assert parse_version_list(b"not json") is None


@pytest.mark.parametrize(
    ("version", "provider", "expected"),
    [
        (
            (2, 27),
            "amphora",
            {
                "tags",
                "timeouts",
                "flavors",
                "vip_acl",
                "availability_zones",
                "http_monitors_on_udp",
            },
        ),
        ((2, 27), "ovn", {"tags"}),
        ((2, 11), "amphora", {"tags", "timeouts", "flavors"}),
        ((2, 4), "amphora", {"timeouts"}),
        (None, "amphora", set()),
    ],
)
def test_octavia_features_are_gated_by_version_and_provider(
    version: tuple[int, int] | None, provider: str, expected: set[str]
) -> None:
    features = OctaviaFeatures(version=version, lb_provider=provider)
    names = ["tags", "timeouts", "flavors", "vip_acl", "availability_zones", "http_monitors_on_udp"]

    assert {name for name in names if getattr(features, name)} == expected


def test_password_auth_fills_user_and_project_domains_from_domain_name() -> None:
    settings = GlobalSettings(
        auth_url="http://k/v3", username="u", password="p", tenant_name="t", domain_name="Default"
    )

    assert auth_method(settings) == (
        "password",
        {
            "username": "u",
            "user_domain_name": "Default",
            "password": "p",
            "project_name": "t",
            "project_domain_name": "Default",
        },
    )


@pytest.mark.parametrize(
    ("credentials", "method"),
    [
        # upstream (gophercloud): a token clears the user and password; a password beats
        # an application credential; a trust goes first, with the password method
        ({"token": "tk", "password": "p", "user_id": "u"}, "token"),
        ({"token": "tk", "application_credential_id": "ac"}, "token"),
        ({"password": "p", "user_id": "u", "application_credential_id": "ac"}, "password"),
        ({"application_credential_id": "ac"}, "application_credential"),
        ({"trust_id": "tr", "token": "tk", "user_id": "u", "password": "p"}, "password"),
    ],
)
def test_credentials_are_chosen_in_upstreams_precedence(
    credentials: dict[str, str], method: str
) -> None:
    settings = GlobalSettings(
        auth_url="http://k/v3",
        application_credential_secret="shh",
        **credentials,  # type: ignore[arg-type]
    )

    assert auth_method(settings)[0] == method


def test_an_application_credential_needs_no_project() -> None:
    settings = GlobalSettings(
        auth_url="http://k/v3",
        tenant_name="t",
        application_credential_id="ac",
        application_credential_secret="shh",
    )

    assert auth_method(settings) == (
        "application_credential",
        {"application_credential_id": "ac", "application_credential_secret": "shh"},
    )


def test_trust_auth_uses_the_trustee() -> None:
    settings = GlobalSettings(
        auth_url="http://k/v3", trust_id="tr", trustee_id="tu", trustee_password="tp"
    )

    assert auth_method(settings) == (
        "password",
        {"user_id": "tu", "password": "tp", "trust_id": "tr"},
    )


def test_a_trust_falls_back_to_user_id_and_password_as_magnum_writes_it() -> None:
    settings = GlobalSettings(auth_url="http://k/v3", trust_id="tr", user_id="u", password="p")

    assert auth_method(settings) == (
        "password",
        {"user_id": "u", "password": "p", "trust_id": "tr"},
    )


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        (GlobalSettings(auth_url="http://k/v3", username="u", password="secret-1"), "username"),
        (
            GlobalSettings(
                auth_url="http://k/v3",
                application_credential_name="ac",
                application_credential_secret="secret-1",
            ),
            "application-credential-name",
        ),
        (GlobalSettings(auth_url="http://k/v3", user_id="u"), "password"),
        (GlobalSettings(auth_url="http://k/v3", trust_id="tr", user_id="u"), "trust-id"),
        (
            GlobalSettings(auth_url="http://k/v3", application_credential_secret="secret-1"),
            "application-credential-secret",
        ),
    ],
)
def test_identities_keystone_cannot_resolve_are_refused_naming_the_key(
    settings: GlobalSettings, key: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        auth_method(settings, path="/etc/cloud.conf")

    assert str(refused.value).startswith(f"/etc/cloud.conf: [Global] {key}: needs ")
    assert "secret-1" not in str(refused.value)
