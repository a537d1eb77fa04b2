"""The simulator checks a list of member bodies the fast way (msgspec against `MemberBody`,
then each distinct address and subnet once) and falls back to the field-by-field check for
any body the typed one refuses. The field-by-field check is the reference: for every body
below, alone and in lists, `distinct_members` gives what checking each body in turn gives,
the same fields or the same error status and words.
"""

from __future__ import annotations

from typing import Any

import pytest

from pyccm_sim.openstack.cloud import Cloud
from pyccm_sim.openstack.errors import ApiError
from pyccm_sim.openstack.settings import Knobs, SimSettings

GOOD = {"name": "node-1", "address": "10.0.0.1", "protocol_port": 30080}


@pytest.fixture(scope="module")
def cloud() -> Cloud:
    return Cloud(settings=SimSettings())


def _subnet(cloud: Cloud) -> str:
    return next(iter(cloud.neutron.subnets.rows))


def _bodies(cloud: Cloud) -> list[Any]:
    subnet = _subnet(cloud)
    return [
        GOOD,
        GOOD | {"subnet_id": subnet},
        GOOD | {"subnet_id": subnet.upper()},
        GOOD | {"subnet_id": "not-a-uuid"},
        GOOD | {"subnet_id": "6f1c2d0e-1111-4222-8333-444455556666"},
        GOOD | {"subnet_id": None},
        GOOD | {"address": "::ffff:10.0.0.1"},
        GOOD | {"address": "2001:db8::0001"},
        GOOD | {"address": "10.0.0.01"},
        GOOD | {"address": 167772161},
        {"name": "no-address", "protocol_port": 30080},
        {"address": "10.0.0.1"},
        GOOD | {"protocol_port": 0},
        GOOD | {"protocol_port": 65536},
        GOOD | {"protocol_port": True},
        GOOD | {"protocol_port": "30080"},
        GOOD | {"protocol_port": 30080.0},
        GOOD | {"name": None},
        GOOD | {"name": "x" * 255},
        GOOD | {"name": "x" * 256},
        GOOD | {"name": 7},
        GOOD | {"weight": 0},
        GOOD | {"weight": 256},
        GOOD | {"weight": 257},
        GOOD | {"weight": None},
        GOOD | {"backup": True},
        GOOD | {"backup": "yes"},
        GOOD | {"backup": None},
        GOOD | {"admin_state_up": False},
        GOOD | {"admin_state_up": None},
        GOOD | {"admin_state_up": 0},
        GOOD | {"monitor_address": "10.0.0.9", "monitor_port": 9000},
        GOOD | {"monitor_address": 5},
        GOOD | {"monitor_port": 0},
        GOOD | {"tags": ["a", "b"]},
        GOOD | {"tags": []},
        GOOD | {"tags": None},
        GOOD | {"tags": ["t" * 256]},
        GOOD | {"tags": "a"},
        GOOD | {"tags": [1]},
        GOOD | {"project_id": "anything", "tenant_id": 3},
        GOOD | {"vnic_type": "normal"},
        GOOD | {"id": "x"},
        "a string",
        None,
    ]


def _outcome(check: Any) -> Any:
    try:
        return ("ok", check())
    except ApiError as error:
        return ("error", error.status, str(error))


def _reference(cloud: Cloud, bodies: list[Any]) -> Any:
    """Each body through the field-by-field check in turn, and the duplicate rule."""

    def check() -> list[dict[str, Any]]:
        fields, seen = [], set()
        for body in bodies:
            checked = cloud.octavia.member_fields(body)
            key = (checked["address"], checked["protocol_port"])
            if key in seen:
                raise ApiError(409, "duplicate")
            seen.add(key)
            fields.append(checked)
        return fields

    return check


@pytest.mark.parametrize("minor", ["2.27", "2.4"])
def test_each_body_alone_gives_what_the_field_by_field_check_gives(
    cloud: Cloud, minor: str
) -> None:
    cloud.knobs.octavia_version = minor
    try:
        for body in _bodies(cloud):
            fast = _outcome(lambda body=body: cloud.octavia.distinct_members([body]))
            slow = _outcome(_reference(cloud, [body]))
            assert fast == slow, body
    finally:
        cloud.knobs.octavia_version = Knobs().octavia_version


def test_a_list_with_one_bad_body_fails_on_the_first_error_in_order(cloud: Cloud) -> None:
    subnet = _subnet(cloud)
    good = [GOOD | {"address": f"10.0.1.{i}", "subnet_id": subnet} for i in range(50)]
    cases = [
        good,
        [*good, GOOD | {"protocol_port": 0}],
        [*good, good[3]],  # a duplicate after 50 good bodies: 409
        [*good, good[3], GOOD | {"weight": 999}],  # the duplicate comes first
        [*good, GOOD | {"weight": 999}, good[3]],  # the bad weight comes first
        [*good, GOOD | {"subnet_id": "6f1c2d0e-1111-4222-8333-444455556666"}, good[0]],
    ]
    for bodies in cases:
        fast = _outcome(lambda bodies=bodies: cloud.octavia.distinct_members(bodies))
        slow = _outcome(_reference(cloud, bodies))
        if slow[0] == "error" and slow[1] == 409:
            assert fast[:2] == ("error", 409), bodies[-2:]
        else:
            assert fast == slow, bodies[-2:]


def test_a_members_fields_share_one_string_per_distinct_value(cloud: Cloud) -> None:
    subnet = _subnet(cloud)
    first, second = (
        cloud.octavia.distinct_members(
            [
                {"name": "node-" + str(7), "address": "10.0.0.7", "protocol_port": port}
                | {"subnet_id": subnet}
            ]
        )[0]
        for port in (30080, 30081)
    )
    assert first["name"] is second["name"]
    assert first["address"] is second["address"]
    assert first["subnet_id"] is second["subnet_id"]
