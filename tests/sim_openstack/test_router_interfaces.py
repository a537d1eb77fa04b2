"""Router interfaces (`add_router_interface` / `remove_router_interface`) as Neutron 29
answers them, driven by openstacksdk, raw requests and the `openstack` CLI.

The answers (bodies, statuses, error types and wordings) are the real Neutron's: the same
requests are sent to both in tests/conformance/test_simulator_matches_real.py.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

import openstack.exceptions
import pytest

from pyccm_sim.openstack.testing import OpenStackSimHandle
from pyccm_sim.scenario import seed_node

from .test_neutron_routes_and_security_rules import _neutron
from .test_openstack_cli_against_the_simulator import BINARY, _cli

MISSING = "3d9c1e0a-6b7a-4c52-9d0e-6f1f4c1b2a77"


def _network(conn: Any, name: str, *cidrs: str, gateway: bool = True) -> tuple[Any, list[Any]]:
    network = conn.network.create_network(name=name)
    subnets = []
    for cidr in cidrs:
        extra = {} if gateway else {"gateway_ip": None}
        version = 6 if ":" in cidr else 4
        subnets.append(
            conn.network.create_subnet(
                network_id=network.id, ip_version=version, cidr=cidr, **extra
            )
        )
    return network, subnets


def _error(answer: tuple[int, Any]) -> tuple[int, str, str]:
    status, body = answer
    return status, body["NeutronError"]["type"], body["NeutronError"]["message"]


def test_add_by_subnet_puts_a_port_on_the_gateway_and_answers_the_interface_info(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    network, (subnet,) = _network(conn, "wired", "192.168.70.0/24")
    router = conn.network.create_router(name="manual")

    info = conn.network.add_interface_to_router(router, subnet=subnet.id)

    (port,) = [p for p in sim.resources("port") if p["device_id"] == router.id]
    assert info == {
        "id": router.id,
        "project_id": port["project_id"],
        "port_id": port["id"],
        "network_id": network.id,
        "subnet_id": subnet.id,
        "subnet_ids": [subnet.id],
    }
    assert port["device_owner"] == "network:router_interface"
    assert port["fixed_ips"] == [{"subnet_id": subnet.id, "ip_address": "192.168.70.1"}]


def test_add_refusals_have_neutrons_statuses_and_wordings(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    _, (subnet, no_gateway) = _network(conn, "wired", "192.168.70.0/24", "192.168.71.0/24")
    conn.network.update_subnet(no_gateway, gateway_ip=None)
    _, (overlapping,) = _network(conn, "overlap", "192.168.70.0/25")
    router = conn.network.create_router(name="manual").id
    other = conn.network.create_router(name="other").id
    conn.network.add_interface_to_router(router, subnet=subnet.id)

    def add(body: Any, router_id: str = router) -> tuple[int, str, str]:
        return _error(
            _neutron(sim, conn, "PUT", f"/routers/{router_id}/add_router_interface", body)
        )

    bad = "Bad router request: "
    assert add({"subnet_id": subnet.id}) == (
        400,
        "BadRequest",
        f"{bad}Router already has a port on subnet {subnet.id}.",
    )
    assert add({"subnet_id": subnet.id}, other) == (
        409,
        "IpAddressAlreadyAllocated",
        f"IP address 192.168.70.1 already allocated in subnet {subnet.id}",
    )
    assert add({"subnet_id": no_gateway.id}) == (
        400,
        "BadRequest",
        f"{bad}Subnet for router interface must have a gateway IP.",
    )
    assert add({"subnet_id": overlapping.id}) == (
        400,
        "BadRequest",
        f"{bad}Cidr 192.168.70.0/25 of subnet {overlapping.id} overlaps with cidr "
        f"192.168.70.0/24 of subnet {subnet.id}.",
    )
    assert add({"subnet_id": subnet.id, "port_id": MISSING}) == (
        400,
        "BadRequest",
        f"{bad}Cannot specify both subnet-id and port-id.",
    )
    assert add({}) == (400, "BadRequest", f"{bad}Either subnet_id or port_id must be specified.")
    # Neutron does not unwrap a `router` key here.
    assert add({"router": {"subnet_id": subnet.id}})[2].endswith("must be specified.")
    assert add({"subnet_id": "nope"}) == (400, "BadRequest", f"{bad}'nope' is not a valid UUID.")
    assert add({"subnet_id": MISSING}) == (
        404,
        "SubnetNotFound",
        f"Subnet {MISSING} could not be found.",
    )
    assert add({"port_id": MISSING}) == (404, "PortNotFound", f"Port {MISSING} could not be found.")
    assert add({"subnet_id": MISSING}, MISSING) == (
        404,
        "RouterNotFound",
        f"Router {MISSING} could not be found",
    )
    # Neutron 29 fails on a body that is not an object.
    assert add([1])[0] == 500
    interfaces = [
        p for p in sim.resources("port") if p["device_owner"] == "network:router_interface"
    ]
    assert sorted(p["device_id"] for p in interfaces) == sorted([router, sim.seeded.router_id])


def test_add_by_port_keeps_the_port_and_refuses_one_in_use(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    network, (subnet, second) = _network(conn, "wired", "192.168.72.0/24", "192.168.73.0/24")
    router = conn.network.create_router(name="manual").id
    other = conn.network.create_router(name="other").id
    port = conn.network.create_port(network_id=network.id, fixed_ips=[{"subnet_id": subnet.id}])
    used = conn.network.create_port(network_id=network.id, device_id="something")
    bare = conn.network.create_port(network_id=network.id, fixed_ips=[])
    double = conn.network.create_port(
        network_id=network.id, fixed_ips=[{"subnet_id": subnet.id}, {"subnet_id": second.id}]
    )

    def add(port_id: str, router_id: str = router) -> tuple[int, Any]:
        body = {"port_id": port_id}
        answer: tuple[int, Any] = _neutron(
            sim, conn, "PUT", f"/routers/{router_id}/add_router_interface", body
        )
        return answer

    assert add(port.id) == (
        200,
        {
            "id": router,
            "project_id": port.project_id,
            "port_id": port.id,
            "network_id": network.id,
            "subnet_id": subnet.id,
            "subnet_ids": [subnet.id],
        },
    )
    in_use = (
        "Unable to complete operation on port {} for network {}. Port already has an attached "
        "device {}."
    )
    assert _error(add(port.id, other)) == (
        409,
        "PortInUse",
        in_use.format(port.id, network.id, router),
    )
    assert _error(add(used.id)) == (
        409,
        "PortInUse",
        in_use.format(used.id, network.id, "something"),
    )
    assert _error(add(bare.id)) == (
        400,
        "BadRequest",
        "Bad router request: Router port must have at least one fixed IP.",
    )
    assert _error(add(double.id, other)) == (
        400,
        "BadRequest",
        "Bad router request: Cannot have multiple IPv4 subnets on router port.",
    )
    shown = conn.network.get_port(port.id)
    assert (shown.device_id, shown.device_owner) == (router, "network:router_interface")
    assert shown.fixed_ips == port.fixed_ips
    # A refused port is left as it was.
    assert (
        conn.network.get_port(double.id).device_id,
        conn.network.get_port(double.id).device_owner,
    ) == ("", "")


def test_remove_by_port_or_subnet_deletes_the_port_and_refusals_match_neutron(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    network, (subnet, spare) = _network(conn, "wired", "192.168.74.0/24", "192.168.75.0/24")
    router = conn.network.create_router(name="manual").id
    port = conn.network.create_port(network_id=network.id, fixed_ips=[{"subnet_id": spare.id}])
    stranger = conn.network.create_port(network_id=network.id)
    by_subnet = conn.network.add_interface_to_router(router, subnet=subnet.id)
    conn.network.add_interface_to_router(router, port=port.id)

    def remove(body: Any, router_id: str = router) -> tuple[int, Any]:
        path = f"/routers/{router_id}/remove_router_interface"
        answer: tuple[int, Any] = _neutron(sim, conn, "PUT", path, body)
        return answer

    assert _error(remove({"port_id": stranger.id})) == (
        404,
        "RouterInterfaceNotFound",
        f"Router {router} does not have an interface with id {stranger.id}",
    )
    assert _error(remove({"port_id": port.id, "subnet_id": subnet.id})) == (
        400,
        "SubnetMismatchForPort",
        f"Subnet on port {port.id} does not match the requested subnet {subnet.id}.",
    )
    assert _error(remove({"subnet_id": MISSING}))[:2] == (404, "SubnetNotFound")
    assert _error(remove({"subnet_id": subnet.id}, MISSING))[:2] == (404, "RouterNotFound")
    assert _error(remove({}))[0] == 400
    # A router's port goes through the router API, not DELETE /ports.
    assert _error(_neutron(sim, conn, "DELETE", f"/ports/{port.id}")) == (
        409,
        "ServicePortInUse",
        f"Port {port.id} cannot be deleted directly via the port API: has device owner "
        "network:router_interface.",
    )

    assert remove({"port_id": port.id})[0] == 200
    assert remove({"subnet_id": subnet.id}) == (200, by_subnet)
    assert _error(remove({"subnet_id": subnet.id})) == (
        404,
        "RouterInterfaceNotFoundForSubnet",
        f"Router {router} has no interface on subnet {subnet.id}",
    )
    assert [p["id"] for p in sim.resources("port") if p["device_id"] == router] == []
    assert conn.network.find_port(port.id) is None
    # The gateway address is the subnet's again: a second router can take it.
    again = conn.network.create_router(name="again")
    assert conn.network.add_interface_to_router(again, subnet=subnet.id)["subnet_id"] == subnet.id
    conn.network.delete_router(router)


def test_floating_ips_need_the_interface_and_keep_it(sim: OpenStackSimHandle, conn: Any) -> None:
    network, (subnet,) = _network(conn, "wired", "192.168.76.0/24")
    router = conn.network.create_router(
        name="edge", external_gateway_info={"network_id": sim.seeded.public_network_id}
    )
    port = conn.network.create_port(network_id=network.id)
    fip = conn.network.create_ip(floating_network_id=sim.seeded.public_network_id)

    with pytest.raises(openstack.exceptions.NotFoundException, match="is not reachable"):
        conn.network.update_ip(fip, port_id=port.id)
    conn.network.add_interface_to_router(router, subnet=subnet.id)
    associated = conn.network.update_ip(fip.id, port_id=port.id)
    with pytest.raises(openstack.exceptions.ConflictException, match="required by one or more"):
        conn.network.remove_interface_from_router(router, subnet=subnet.id)
    conn.network.update_ip(fip, port_id=None)
    conn.network.remove_interface_from_router(router, subnet=subnet.id)
    with pytest.raises(openstack.exceptions.NotFoundException, match="is not reachable"):
        conn.network.update_ip(fip, port_id=port.id)

    assert (associated.router_id, associated.fixed_ip_address) == (router.id, "192.168.76.2")
    assert conn.network.get_ip(fip.id).port_id is None


def test_the_external_subnet_is_already_the_gateways(sim: OpenStackSimHandle, conn: Any) -> None:
    # The real Neutron says first that a tenant cannot add the admin's subnet; the
    # simulator has one project, so the gateway port's subnet is refused as a duplicate.
    status, error, message = _error(
        _neutron(
            sim,
            conn,
            "PUT",
            f"/routers/{sim.seeded.router_id}/add_router_interface",
            {"subnet_id": sim.seeded.public_subnet_id},
        )
    )

    assert (status, error) == (400, "BadRequest")
    assert message.endswith(f"Router already has a port on subnet {sim.seeded.public_subnet_id}.")


def test_ipv6_prefixes_of_one_network_share_the_routers_port(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    _, (v4, v6a, v6b) = _network(conn, "dual", "192.168.77.0/24", "fd00:80::/64", "fd00:81::/64")
    router = conn.network.create_router(name="dual")

    infos = [conn.network.add_interface_to_router(router, subnet=s.id) for s in (v4, v6a, v6b)]
    removed = conn.network.remove_interface_from_router(router, subnet=v6a.id)

    assert infos[1]["port_id"] == infos[2]["port_id"] != infos[0]["port_id"]
    assert infos[2]["subnet_ids"] == [v6b.id]
    assert removed["port_id"] == infos[1]["port_id"]
    shared = conn.network.get_port(infos[1]["port_id"])
    assert [e["subnet_id"] for e in shared.fixed_ips] == [v6b.id]


cli = pytest.mark.skipif(BINARY is None, reason="the openstack CLI is not installed")


@pytest.mark.openstackcli
@cli
def test_openstack_router_add_and_remove_subnet_and_port(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    network, (subnet, second) = _network(conn, "wired", "192.168.78.0/24", "192.168.79.0/24")
    port = conn.network.create_port(
        name="uplink", network_id=network.id, fixed_ips=[{"subnet_id": second.id}]
    )
    _cli(sim, "router", "create", "manual")

    _cli(sim, "router", "add", "subnet", "manual", subnet.id, output=False)
    _cli(sim, "router", "add", "port", "manual", "uplink", output=False)
    attached = _cli(sim, "port", "list", "--router", "manual")
    _cli(sim, "router", "remove", "subnet", "manual", subnet.id, output=False)
    _cli(sim, "router", "remove", "port", "manual", "uplink", output=False)

    assert sorted(p["Fixed IP Addresses"][0]["ip_address"] for p in attached) == [
        "192.168.78.1",
        port.fixed_ips[0]["ip_address"],
    ]
    router = conn.network.find_router("manual")
    assert [p["id"] for p in sim.resources("port") if p["device_id"] == router.id] == []


@pytest.mark.openstackcli
@cli
def test_openstack_router_add_subnet_twice_fails_with_neutrons_message(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    assert BINARY is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env["OS_CLIENT_CONFIG_FILE"] = str(sim.clouds_yaml_path)
    subnet = sim.seeded.private_subnet_id

    result = subprocess.run(
        [BINARY, "--os-cloud", sim.cloud_name, "router", "add", "subnet", "router1", subnet],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 1
    assert f"Router already has a port on subnet {subnet}." in result.stderr
    assert seed_node(0).internal_ip  # the seeded nodes' subnet is the one refused
