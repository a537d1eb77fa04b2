"""`--cluster-cidr` parsing and the route ownership rule (pyccm/workers/route/README.md)."""

from __future__ import annotations

import ipaddress

import pytest

from pyccm.provider.errors import ConfigError
from pyccm.workers.route.cidrs import owned, parse_cluster_cidrs


def test_one_cidr_is_a_single_stack_cluster() -> None:
    assert parse_cluster_cidrs("10.244.0.0/16") == (ipaddress.ip_network("10.244.0.0/16"),)


def test_an_ipv4_and_an_ipv6_cidr_make_a_dual_stack_cluster() -> None:
    assert parse_cluster_cidrs(" fd00:10:244::/56 , 10.244.0.0/16 ") == (
        ipaddress.ip_network("fd00:10:244::/56"),
        ipaddress.ip_network("10.244.0.0/16"),
    )


def test_host_bits_are_accepted_as_go_does() -> None:
    assert parse_cluster_cidrs("10.244.1.0/16") == (ipaddress.ip_network("10.244.0.0/16"),)


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ("garbage", "'garbage' is not a CIDR"),
        ("10.244.0.0/33", "'10.244.0.0/33' is not a CIDR"),
        ("10.244.0.1", "'10.244.0.1' is not a CIDR"),
        ("10.244.0.0/16,", "'' is not a CIDR"),
        ("10.1.0.0/16,10.2.0.0/16,fd00::/56", "at most two CIDRs"),
        ("10.1.0.0/16,10.2.0.0/16", "got two IPv4"),
        ("fd00:1::/56,fd00:2::/56", "got two IPv6"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_flag(value: str, complaint: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_cluster_cidrs(value)

    message = str(caught.value)
    assert message.startswith("--cluster-cidr")
    assert complaint in message
    assert "\n" not in message


CLUSTER = (ipaddress.ip_network("10.245.0.0/16"), ipaddress.ip_network("fd00:10:244::/56"))


@pytest.mark.parametrize(
    ("cidr", "ours"),
    [
        ("10.245.3.0/24", True),  # inside
        ("10.244.0.0/15", True),  # bigger, but its last address (10.245.255.255) is inside
        ("10.240.0.0/13", False),  # contains the cluster CIDR: neither end is inside
        ("10.246.0.0/24", False),
        ("fd00:10:244:7::/64", True),
        ("fd00:10:245::/64", False),
        ("not-a-cidr", False),
    ],
)
def test_a_route_is_ours_when_its_first_or_last_address_is_in_a_cluster_cidr(
    cidr: str, ours: bool
) -> None:
    assert owned(cidr, cluster_cidrs=CLUSTER, route_name=cidr) is ours
