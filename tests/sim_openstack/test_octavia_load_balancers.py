"""Octavia through openstacksdk: fully populated create, the state machine, 409s, deletes."""

from __future__ import annotations

import time
from typing import Any

import pytest
from openstack import exceptions as sdk_exceptions

from pyccm_sim.openstack.testing import OpenStackSimHandle
from pyccm_sim.scenario import seed_node

LB_NAME = "kube_service_kubernetes_default_web"
# How long a write keeps the load balancer PENDING_* in the tests that read that state back:
# the next request must land inside it on a loaded machine (the fixture's 20 ms did not,
# under parallel runs: the load balancer was already gone or ACTIVE).
PENDING_FOR_S = 2.0


def _tree(sim: OpenStackSimHandle, *, name: str = LB_NAME, monitor: bool = True) -> dict[str, Any]:
    members = [
        {
            "name": seed_node(i).name,
            "address": seed_node(i).internal_ip,
            "protocol_port": 30080,
            "subnet_id": sim.seeded.private_subnet_id,
        }
        for i in (0, 1)
    ]
    pool: dict[str, Any] = {
        "name": f"pool_0_{name}",
        "protocol": "TCP",
        "lb_algorithm": "ROUND_ROBIN",
        "members": members,
    }
    if monitor:
        pool["healthmonitor"] = {
            "name": f"monitor_0_{name}",
            "type": "TCP",
            "delay": 5,
            "timeout": 3,
            "max_retries": 1,
            "max_retries_down": 3,
        }
    listener = {
        "name": f"listener_0_{name}",
        "protocol": "TCP",
        "protocol_port": 80,
        "tags": [name],
        "default_pool": pool,
    }
    return {
        "name": name,
        "description": "Kubernetes external service default/web from cluster kubernetes",
        "vip_subnet_id": sim.seeded.private_subnet_id,
        "provider": "amphora",
        "tags": [name],
        "listeners": [listener],
    }


def wait_for(conn: Any, lb_id: str, status: str = "ACTIVE", timeout_s: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        lb = conn.load_balancer.get_load_balancer(lb_id)
        if lb.provisioning_status == status or time.monotonic() > deadline:
            return lb
        time.sleep(0.01)


def test_fully_populated_create_goes_pending_then_active(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    created = conn.load_balancer.create_load_balancer(**_tree(sim))

    active = wait_for(conn, created.id)
    (listener,) = conn.load_balancer.listeners(loadbalancer_id=created.id)
    (pool,) = conn.load_balancer.pools(loadbalancer_id=created.id)
    members = list(conn.load_balancer.members(pool.id))
    monitor = conn.load_balancer.get_health_monitor(pool.health_monitor_id)

    assert created.provisioning_status == "PENDING_CREATE"
    assert (active.provisioning_status, active.operating_status) == ("ACTIVE", "ONLINE")
    assert (listener.protocol, listener.protocol_port, listener.default_pool_id) == (
        "TCP",
        80,
        pool.id,
    )
    assert sorted(m.address for m in members) == [
        seed_node(0).internal_ip,
        seed_node(1).internal_ip,
    ]
    assert {m.operating_status for m in members} == {"ONLINE"}
    assert (monitor.type, monitor.delay, monitor.timeout) == ("TCP", 5, 3)
    assert active.tags == [LB_NAME]


def test_vip_port_exists_in_neutron_and_takes_a_fip(sim: OpenStackSimHandle, conn: Any) -> None:
    lb = wait_for(conn, conn.load_balancer.create_load_balancer(**_tree(sim)).id)

    port = conn.network.get_port(lb.vip_port_id)
    fip = conn.network.create_ip(
        floating_network_id=sim.seeded.public_network_id, port_id=lb.vip_port_id
    )

    assert port.device_owner == "Octavia"
    assert port.fixed_ips[0]["ip_address"] == lb.vip_address
    assert lb.vip_network_id == sim.seeded.private_network_id
    assert fip.fixed_ip_address == lb.vip_address


def test_lookup_by_name_and_other_filters(sim: OpenStackSimHandle, conn: Any) -> None:
    lb = wait_for(conn, conn.load_balancer.create_load_balancer(**_tree(sim)).id)
    wait_for(conn, conn.load_balancer.create_load_balancer(**_tree(sim, name="other")).id)

    by_name = [x.id for x in conn.load_balancer.load_balancers(name=LB_NAME)]
    by_port = [x.id for x in conn.load_balancer.load_balancers(vip_port_id=lb.vip_port_id)]
    by_tag = [x.id for x in conn.load_balancer.load_balancers(tags=[LB_NAME])]
    nothing = list(conn.load_balancer.load_balancers(name="kube_service_nope"))

    assert by_name == by_port == by_tag == [lb.id]
    assert nothing == []


def test_child_writes_put_the_lb_in_pending_update_then_back_to_active(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    lb = wait_for(conn, conn.load_balancer.create_load_balancer(**_tree(sim, monitor=False)).id)
    (pool,) = conn.load_balancer.pools(loadbalancer_id=lb.id)
    sim.set_knobs(provisioning_delay_s=PENDING_FOR_S)

    monitor = conn.load_balancer.create_health_monitor(
        pool_id=pool.id, type="TCP", delay=5, timeout=3, max_retries=1
    )
    pending = conn.load_balancer.get_load_balancer(lb.id).provisioning_status
    active = wait_for(conn, lb.id)
    conn.load_balancer.update_health_monitor(monitor, delay=10)
    wait_for(conn, lb.id)

    assert pending == "PENDING_UPDATE"
    assert active.provisioning_status == "ACTIVE"
    assert conn.load_balancer.get_health_monitor(monitor.id).delay == 10


def test_duplicate_listener_port_is_409_bad_pool_protocol_400_unsupported_algorithm_501(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    lb = wait_for(conn, conn.load_balancer.create_load_balancer(**_tree(sim)).id)

    with pytest.raises(sdk_exceptions.ConflictException, match="protocol_port 80"):
        conn.load_balancer.create_listener(loadbalancer_id=lb.id, protocol="TCP", protocol_port=80)
    udp = conn.load_balancer.create_listener(
        loadbalancer_id=lb.id, protocol="UDP", protocol_port=80
    )
    wait_for(conn, lb.id)
    with pytest.raises(
        sdk_exceptions.BadRequestException, match="invalid while the listener protocol"
    ):
        conn.load_balancer.create_pool(
            listener_id=udp.id, protocol="PROXY", lb_algorithm="ROUND_ROBIN"
        )
    # The amphora driver's UnsupportedOptionError comes back as 501, not 400.
    with pytest.raises(sdk_exceptions.HttpException, match="does not support") as refused:
        conn.load_balancer.create_pool(
            listener_id=udp.id, protocol="UDP", lb_algorithm="SOURCE_IP_PORT"
        )
    assert refused.value.status_code == 501


def test_monitor_timeout_greater_than_delay_is_400(sim: OpenStackSimHandle, conn: Any) -> None:
    lb = wait_for(conn, conn.load_balancer.create_load_balancer(**_tree(sim, monitor=False)).id)
    (pool,) = conn.load_balancer.pools(loadbalancer_id=lb.id)

    with pytest.raises(sdk_exceptions.BadRequestException, match="timeout"):
        conn.load_balancer.create_health_monitor(
            pool_id=pool.id, type="TCP", delay=3, timeout=5, max_retries=1
        )
    assert conn.load_balancer.get_load_balancer(lb.id).provisioning_status == "ACTIVE"


def test_batch_member_put_replaces_the_set_and_answers_202(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    lb = wait_for(conn, conn.load_balancer.create_load_balancer(**_tree(sim)).id)
    (pool,) = conn.load_balancer.pools(loadbalancer_id=lb.id)
    wanted = [
        {"name": seed_node(i).name, "address": seed_node(i).internal_ip, "protocol_port": 30080}
        for i in (1, 3)
    ]
    before = sim.counters()["member"]
    sim.set_knobs(provisioning_delay_s=PENDING_FOR_S)

    answer = conn.load_balancer.put(f"/lbaas/pools/{pool.id}/members", json={"members": wanted})
    pending = conn.load_balancer.get_load_balancer(lb.id).provisioning_status
    wait_for(conn, lb.id)

    assert answer.status_code == 202
    assert pending == "PENDING_UPDATE"
    addresses = sorted(m.address for m in conn.load_balancer.members(pool.id))
    assert addresses == [seed_node(1).internal_ip, seed_node(3).internal_ip]
    after = sim.counters()["member"]
    # node-0001 stays (its subnet_id changed: one update), node-0000 goes, node-0003 comes.
    assert {op: after[op] - before[op] for op in after} == {
        "created": 1,
        "updated": 1,
        "deleted": 1,
    }


def test_batch_member_put_is_405_when_turned_off(sim: OpenStackSimHandle, conn: Any) -> None:
    lb = wait_for(conn, conn.load_balancer.create_load_balancer(**_tree(sim)).id)
    (pool,) = conn.load_balancer.pools(loadbalancer_id=lb.id)
    sim.set_knobs(batch_members=False)

    answer = conn.load_balancer.put(f"/lbaas/pools/{pool.id}/members", json={"members": []})

    assert answer.status_code == 405


def test_serial_member_create_and_delete(sim: OpenStackSimHandle, conn: Any) -> None:
    lb = wait_for(conn, conn.load_balancer.create_load_balancer(**_tree(sim, monitor=False)).id)
    (pool,) = conn.load_balancer.pools(loadbalancer_id=lb.id)

    member = conn.load_balancer.create_member(
        pool, address=seed_node(4).internal_ip, protocol_port=30080, name="member_node-0004"
    )
    wait_for(conn, lb.id)
    with pytest.raises(sdk_exceptions.ConflictException):
        conn.load_balancer.create_member(
            pool, address=seed_node(4).internal_ip, protocol_port=30080
        )
    conn.load_balancer.delete_member(member, pool)
    wait_for(conn, lb.id)

    assert member.operating_status == "OFFLINE"
    assert len(list(conn.load_balancer.members(pool.id))) == 2


def test_delete_without_cascade_with_children_is_400_and_cascade_removes_everything(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    lb = wait_for(conn, conn.load_balancer.create_load_balancer(**_tree(sim)).id)

    with pytest.raises(sdk_exceptions.BadRequestException, match="it has children"):
        conn.load_balancer.delete_load_balancer(lb)
    sim.set_knobs(provisioning_delay_s=PENDING_FOR_S)
    conn.load_balancer.delete_load_balancer(lb, cascade=True)
    pending = conn.load_balancer.get_load_balancer(lb.id).provisioning_status
    sim.settle()

    assert pending == "PENDING_DELETE"
    with pytest.raises(sdk_exceptions.NotFoundException):
        conn.load_balancer.get_load_balancer(lb.id)
    inventory = sim.inventory()
    assert [
        inventory[k] for k in ("loadbalancer", "listener", "pool", "member", "healthmonitor")
    ] == [0] * 5
    with pytest.raises(sdk_exceptions.NotFoundException):
        conn.network.get_port(lb.vip_port_id)


def test_child_by_child_delete_then_bare_lb_delete(sim: OpenStackSimHandle, conn: Any) -> None:
    lb = wait_for(conn, conn.load_balancer.create_load_balancer(**_tree(sim)).id)
    (listener,) = conn.load_balancer.listeners(loadbalancer_id=lb.id)
    (pool,) = conn.load_balancer.pools(loadbalancer_id=lb.id)

    conn.load_balancer.delete_health_monitor(pool.health_monitor_id)
    wait_for(conn, lb.id)
    conn.load_balancer.delete_pool(pool)
    wait_for(conn, lb.id)
    conn.load_balancer.delete_listener(listener)
    wait_for(conn, lb.id)
    conn.load_balancer.delete_load_balancer(lb)
    sim.settle()

    assert sim.inventory()["loadbalancer"] == 0
    assert sim.counters()["member"]["deleted"] == 2


def test_update_name_description_and_tags(sim: OpenStackSimHandle, conn: Any) -> None:
    lb = wait_for(conn, conn.load_balancer.create_load_balancer(**_tree(sim)).id)

    conn.load_balancer.update_load_balancer(
        lb, tags=[LB_NAME, "kube_service_kubernetes_default_db"], description="shared"
    )
    updated = wait_for(conn, lb.id)

    assert updated.tags == [LB_NAME, "kube_service_kubernetes_default_db"]
    assert updated.description == "shared"


def test_operating_status_follows_members(sim: OpenStackSimHandle, conn: Any) -> None:
    lb = wait_for(conn, conn.load_balancer.create_load_balancer(**_tree(sim)).id)

    sim.set_knobs(down_member_addresses={seed_node(0).internal_ip})
    degraded = conn.load_balancer.get_load_balancer(lb.id).operating_status
    sim.set_knobs(down_member_addresses={seed_node(0).internal_ip, seed_node(1).internal_ip})
    (pool,) = conn.load_balancer.pools(loadbalancer_id=lb.id)

    assert degraded == "DEGRADED"
    assert pool.operating_status == "ERROR"
