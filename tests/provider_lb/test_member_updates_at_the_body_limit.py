"""Members in one batch call per pool, split only when the cloud's request body limit
(oslo.middleware's `max_request_body_size`, answered 413) refuses the whole list: missing
members in `additive_only` parts, removals one DELETE each, and a load balancer whose
members do not fit in its create made without them. Nothing lost, nothing twice."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from pyccm.provider.errors import RetryAfter
from pyccm.provider.interface import LoadBalancers
from pyccm.provider.openstack.loadbalancer.api import body_size
from pyccm.provider.openstack.loadbalancer.batch import additions_and_removals, first_part
from pyccm.provider.openstack.loadbalancer.desired import PoolSpec
from pyccm.provider.openstack.loadbalancer.members import Backend
from pyccm.provider.openstack.loadbalancer.resources import Member
from pyccm_sim.openstack.calllog import Seq
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import converge, ensure, nodes, one, reads, service, with_annotations, writes

ONE_PORT = ((80, 30080, "TCP"),)
MEMBERS = "lbaas/pools/{id}/members"


def member_names(sim: OpenStackSimHandle) -> list[str]:
    return sorted(m["name"] for m in sim.resources("member"))


def member_writes(sim: OpenStackSimHandle, mark: Seq) -> list[tuple[str, str, int]]:
    """(method, query, status) of every member write since `mark`."""
    return [
        (c.method, c.path.partition("?")[2], c.status)
        for c in sim.calls(since=mark)
        if c.is_write and "/members" in c.path
    ]


def test_a_burst_of_joins_and_leaves_is_one_batch_call_per_pool(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service()
    svc = with_annotations(svc, ensure(lbs, svc, nodes(6)).annotations_to_set)

    mark = sim.mark()
    converge(lambda: lbs.update(service=svc, nodes=nodes(9, start=3)))

    assert writes(sim, mark) == [("PUT", MEMBERS)] * 2
    expected = sorted(n.name for n in nodes(9, start=3))
    assert member_names(sim) == sorted(expected * 2)


def test_members_just_written_are_not_read_back_by_the_next_sync(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service()
    svc = with_annotations(svc, ensure(lbs, svc, nodes(6)).annotations_to_set)

    mark = sim.mark()
    # 3 nodes leave and 3 join: the same count, so each pool's members are read to compare,
    # once: the second sync (the second pool's PUT) does not read back the first's.
    converge(lambda: lbs.update(service=svc, nodes=nodes(6, start=3)))

    assert reads(sim, mark).count(MEMBERS) == 2
    assert writes(sim, mark) == [("PUT", MEMBERS)] * 2
    assert member_names(sim) == sorted([n.name for n in nodes(6, start=3)] * 2)


def test_removals_over_the_body_limit_are_one_delete_each_and_leave_exactly_the_nodes(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(ports=ONE_PORT)
    svc = with_annotations(svc, ensure(lbs, svc, nodes(12)).annotations_to_set)
    # The 10 members left no longer fit in one call: 300 bytes is about two members.
    sim.set_knobs(max_request_body_size=300)

    mark = sim.mark()
    converge(lambda: lbs.update(service=svc, nodes=nodes(10)))

    assert member_writes(sim, mark) == [
        ("PUT", "", 413),  # the whole list, once: the limit is then known
        ("DELETE", "", 204),
        ("DELETE", "", 204),
    ]
    assert member_names(sim) == sorted(n.name for n in nodes(10))


def test_additions_over_the_body_limit_go_in_additive_parts_that_fit(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(ports=ONE_PORT)
    svc = with_annotations(svc, ensure(lbs, svc, nodes(2)).annotations_to_set)
    sim.set_knobs(max_request_body_size=600)

    mark = sim.mark()
    converge(lambda: lbs.update(service=svc, nodes=nodes(12)))

    calls = member_writes(sim, mark)
    assert calls[0] == ("PUT", "", 413)  # the whole list, once
    # Then parts: the limit is first guessed (half the refused body), a part over it is
    # refused too and teaches a lower one; nothing but additive parts is sent.
    assert {call[:2] for call in calls[1:]} == {("PUT", "additive_only=true")}
    assert sum(call[2] == 202 for call in calls) > 1  # 10 new members need several parts
    assert member_names(sim) == sorted(n.name for n in nodes(12))


def test_a_load_balancer_whose_members_are_over_the_limit_is_created_once_without_them(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    sim.set_knobs(max_request_body_size=2500)
    svc = service()

    mark = sim.mark()
    with pytest.raises(Exception, match="just created"):
        lbs.ensure(service=svc, nodes=nodes(12))

    creates = [
        (c.method, c.status)
        for c in sim.writes(since=mark)
        if c.path.endswith("/lbaas/loadbalancers")
    ]
    assert creates == [("POST", 413), ("POST", 201)]
    assert len(sim.resources("loadbalancer")) == 1
    assert len(sim.resources("pool")) == 2
    assert sim.resources("member") == []


def test_a_fully_populated_create_that_fits_is_one_call(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    mark = sim.mark()
    ensure(lbs, service(), nodes(12))

    assert writes(sim, mark) == [("POST", "lbaas/loadbalancers"), ("POST", "floatingips")]
    assert len(sim.resources("member")) == 24
    assert one(sim, "loadbalancer")["provisioning_status"] == "ACTIVE"


# --- the split itself ---------------------------------------------------------------------


def pool_with(backends: tuple[Backend, ...], **options: Any) -> PoolSpec:
    return PoolSpec(
        name="pool_0_x",
        protocol="TCP",
        lb_algorithm="ROUND_ROBIN",
        persistence=False,
        backends=backends,
        backends_hash=hash(backends),
        member_port=30080,
        **options,
    )


def pool_of(names: list[str]) -> PoolSpec:
    return pool_with(tuple((name, f"10.0.0.{i}") for i, name in enumerate(names)))


def test_the_split_adds_what_is_missing_or_changed_and_removes_what_is_not_wanted() -> None:
    spec = pool_of(["a", "b", "c"])
    current = [
        Member(id="1", name="a", address="10.0.0.0", protocol_port=30080),
        Member(id="2", name="old-b", address="10.0.0.1", protocol_port=30080),
        Member(id="3", name="gone", address="10.0.0.9", protocol_port=30080),
    ]

    additions, removals = additions_and_removals(spec, current)

    # b is updated in place (same address and port), c is new; only "gone" is deleted.
    assert [name for name, _ in additions] == ["b", "c"]
    assert removals == ["3"]


def test_each_part_fits_and_the_parts_cover_every_member_once() -> None:
    spec = pool_of([f"node-{i:04d}" for i in range(500)])
    limit = 4096

    parts: list[list[dict[str, object]]] = []
    rest = spec.backends
    while rest:
        members, count = first_part(spec, rest, limit)
        parts.append(msgspec.json.decode(msgspec.json.encode(members)))
        assert body_size({"members": members}) <= limit
        rest = rest[count:]

    assert len(parts) > 1
    assert [body for part in parts for body in part] == [spec.member_body(b) for b in spec.backends]


def test_the_member_list_is_the_json_of_each_members_body() -> None:
    """The list is written straight into one buffer; it must be byte for byte what msgspec
    makes of the bodies, every optional field and a dual-stack pool's two subnets included."""
    backends = (('n-\u00e9"1', "10.0.0.1"), ("n2", "fd00::2"), ("n3", "10.0.0.3"))
    spec = pool_with(
        backends,
        member_subnet_id="subnet-v4",
        other_version=6,
        other_member_subnet_id="subnet-v6",
        monitor_port=10256,
    )

    encoded = msgspec.json.encode(spec.member_list())

    assert encoded == msgspec.json.encode([spec.member_body(b) for b in backends])
    assert [m["subnet_id"] for m in msgspec.json.decode(encoded)] == [
        "subnet-v4",
        "subnet-v6",
        "subnet-v4",
    ]
    assert msgspec.json.encode(spec.member_list(backends[1:2])) == msgspec.json.encode(
        [spec.member_body(backends[1])]
    )


def test_a_pool_whose_split_just_finished_is_not_read_back_by_the_next_sync(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(ports=ONE_PORT)
    svc = with_annotations(svc, ensure(lbs, svc, nodes(2)).annotations_to_set)
    sim.set_knobs(max_request_body_size=600)
    converge(lambda: lbs.update(service=svc, nodes=nodes(12)))

    mark = sim.mark()
    lbs.update(service=svc, nodes=nodes(12))

    # Its last part left the whole list there, as one batch update would have.
    assert MEMBERS not in reads(sim, mark)
    assert writes(sim, mark) == []
    assert member_names(sim) == sorted(n.name for n in nodes(12))


def test_a_pool_known_to_go_in_parts_is_read_once_to_compare_and_to_split(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(ports=ONE_PORT)
    svc = with_annotations(svc, ensure(lbs, svc, nodes(6)).annotations_to_set)
    sim.set_knobs(max_request_body_size=300)
    converge(lambda: lbs.update(service=svc, nodes=nodes(7)))  # a 413 teaches the limit

    # The same count of other nodes: the members are compared and the split begins, from
    # one read of them.
    mark = sim.mark()
    with pytest.raises(RetryAfter):
        lbs.update(service=svc, nodes=nodes(7, start=1))
    assert reads(sim, mark).count(MEMBERS) == 1
    assert [method for method, _ in writes(sim, mark)] == ["PUT"]

    converge(lambda: lbs.update(service=svc, nodes=nodes(7, start=1)))
    assert member_names(sim) == sorted(n.name for n in nodes(7, start=1))
