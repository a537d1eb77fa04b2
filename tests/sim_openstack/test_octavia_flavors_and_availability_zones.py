"""Octavia's flavors and availability zones: made through its admin API (openstacksdk here),
and checked by a load balancer create with Octavia's answers, in Octavia's order."""

from __future__ import annotations

from typing import Any

import pytest
from openstack import exceptions as sdk_exceptions

from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import octavia_flavor, octavia_zone

UNKNOWN_FLAVOR = "3f0e8a34-0000-4000-8000-00000000b16f"


def create(sim: OpenStackSimHandle, **fields: Any) -> tuple[int, Any]:
    """POST /loadbalancers on the private subnet: (status, body)."""
    body = {"loadbalancer": {"vip_subnet_id": sim.seeded.private_subnet_id, **fields}}
    answer = sim.connection().load_balancer.post("/lbaas/loadbalancers", json=body)
    return answer.status_code, answer.json()


def refusal(sim: OpenStackSimHandle, **fields: Any) -> tuple[int, str]:
    status, body = create(sim, **fields)
    return status, body.get("faultstring", "")


def test_a_flavor_and_a_zone_made_by_the_admin_api_are_taken(sim: OpenStackSimHandle) -> None:
    conn = sim.connection()
    flavor = octavia_flavor(conn, "big")
    zone = octavia_zone(conn, "az-big")

    status, body = create(sim, flavor_id=flavor, availability_zone=zone)

    assert status == 201
    lb = body["loadbalancer"]
    # No provider asked for: the flavor's.
    assert (lb["flavor_id"], lb["availability_zone"], lb["provider"]) == (flavor, zone, "amphora")
    assert [f.name for f in conn.load_balancer.flavors()] == ["big"]
    assert [z.name for z in conn.load_balancer.availability_zones()] == ["az-big"]


@pytest.mark.parametrize(
    ("fields", "answer"),
    [
        ({"flavor_id": UNKNOWN_FLAVOR}, "Validation failure: Invalid flavor_id."),
        ({"availability_zone": "az-nowhere"}, "Validation failure: Invalid availability zone."),
        (
            {"flavor_id": "small"},
            "Invalid input for field/attribute flavor_id. Value: 'small'. "
            "Value should be UUID format",
        ),
    ],
    ids=["unknown-flavor", "unknown-zone", "flavor-not-a-uuid"],
)
def test_unknown_ones_are_refused_with_octavias_wording(
    sim: OpenStackSimHandle, fields: dict[str, str], answer: str
) -> None:
    assert refusal(sim, **fields) == (400, answer)
    assert sim.inventory()["loadbalancer"] == 0


def test_disabled_ones_are_not_allowed(sim: OpenStackSimHandle) -> None:
    conn = sim.connection()
    flavor = octavia_flavor(conn, "off", enabled=False)
    zone = octavia_zone(conn, "az-off", enabled=False)

    assert refusal(sim, flavor_id=flavor) == (
        400,
        f"The selected flavor is not allowed in this deployment: {flavor}",
    )
    assert refusal(sim, availability_zone=zone) == (
        400,
        "The selected availability_zone is not allowed in this deployment: az-off",
    )


def test_a_provider_other_than_the_flavors_is_refused(sim: OpenStackSimHandle) -> None:
    flavor = octavia_flavor(sim.connection(), "big")

    assert refusal(sim, flavor_id=flavor, provider="ovn") == (
        400,
        f"Flavor '{flavor}' is not compatible with provider 'ovn'",
    )
    # The flavor is checked before the zone, and both before the provider.
    assert refusal(sim, flavor_id=UNKNOWN_FLAVOR, availability_zone="x", provider="nginx") == (
        400,
        "Validation failure: Invalid flavor_id.",
    )


def test_the_catalogue_refuses_what_octavia_refuses(sim: OpenStackSimHandle) -> None:
    lb = sim.connection().load_balancer
    with pytest.raises(sdk_exceptions.BadRequestException, match="Provider 'nginx' is not enabled"):
        lb.create_flavor_profile(name="p", provider_name="nginx", flavor_data="{}")
    with pytest.raises(sdk_exceptions.BadRequestException, match="is not a valid option for"):
        lb.create_flavor_profile(name="p", provider_name="amphora", flavor_data="not json")
    octavia_flavor(sim.connection(), "big")
    with pytest.raises(sdk_exceptions.ConflictException, match="A flavor of big already exists"):
        octavia_flavor(sim.connection(), "big")


def test_a_flavor_or_zone_in_use_cannot_be_deleted(sim: OpenStackSimHandle) -> None:
    conn = sim.connection()
    flavor = octavia_flavor(conn, "big")
    zone = octavia_zone(conn, "az-big")
    status, _ = create(sim, flavor_id=flavor, availability_zone=zone)
    assert status == 201

    with pytest.raises(sdk_exceptions.ConflictException, match="is in use"):
        conn.load_balancer.delete_flavor(flavor)
    with pytest.raises(sdk_exceptions.ConflictException, match="is in use"):
        conn.load_balancer.delete_availability_zone(zone)
    assert [f.id for f in conn.load_balancer.flavors()] == [flavor]
