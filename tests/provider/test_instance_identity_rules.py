"""providerIDs, zones and instance types read the way upstream reads them."""

from __future__ import annotations

import pytest

from pyccm.provider.errors import InvalidProviderId
from pyccm.provider.openstack.common.provider_ids import parse_provider_id
from pyccm.provider.openstack.instances.nova import is_label_value, quote_meta, sanitize_zone


@pytest.mark.parametrize(
    ("provider_id", "expected"),
    [
        (
            "openstack:///8a7c1c1e-0000-4000-8000-000000000001",
            ("", "8a7c1c1e-0000-4000-8000-000000000001"),
        ),
        ("openstack://RegionOne/abc", ("RegionOne", "abc")),
        ("abc", ("", "abc")),
        ("/abc", ("", "abc")),
        ("RegionOne/abc", ("RegionOne", "abc")),
    ],
)
def test_provider_ids_plain_regional_and_bare(provider_id: str, expected: tuple[str, str]) -> None:
    assert parse_provider_id(provider_id) == expected


@pytest.mark.parametrize(
    "provider_id", ["aws:///i-123", "openstack://", "openstack:///a/b", "openstack:///"]
)
def test_foreign_or_malformed_provider_ids_are_refused(provider_id: str) -> None:
    with pytest.raises(InvalidProviderId):
        parse_provider_id(provider_id)


@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        ("nova", "nova"),
        ("zone A (west)", "zone-A-west"),
        ("--az.1__", "az.1"),
        ("a" * 70, "a" * 63),
        ("", ""),
    ],
)
def test_zones_are_sanitised_into_label_values(zone: str, expected: str) -> None:
    assert sanitize_zone(zone) == expected


def test_names_are_quoted_like_go_quote_meta_for_novas_regex_filter() -> None:
    assert quote_meta("node-1.example.com") == r"node-1\.example\.com"
    assert quote_meta("a+b(c)") == r"a\+b\(c\)"


@pytest.mark.parametrize(
    ("text", "valid"), [("m1.small", True), ("m1 small", False), ("-x", False), ("x" * 64, False)]
)
def test_flavor_names_must_be_label_values(text: str, valid: bool) -> None:
    assert is_label_value(text) is valid
