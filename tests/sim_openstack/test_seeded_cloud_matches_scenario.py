"""The seeded cloud mirrors `sim.scenario`, and the written configs reach it."""

from __future__ import annotations

import configparser
import json
from typing import Any

import yaml

from pyccm_sim.openstack.testing import OpenStackSimHandle
from pyccm_sim.scenario import EXTERNAL_CIDR, TENANT_CIDR, TENANT_GATEWAY, seed_node


def test_every_seeded_node_has_a_server_port_with_its_internal_ip(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    for index in (0, 1, 3, 4, 5):
        node = seed_node(index)
        (server,) = conn.compute.servers(details=True, name=f"^{node.name}$")
        (port,) = conn.network.ports(device_id=server.id)

        assert port.fixed_ips[0]["ip_address"] == node.internal_ip
        assert port.device_owner.startswith("compute:")
        assert port.network_id == sim.seeded.private_network_id
        assert port.status == "ACTIVE"


def test_networks_subnets_and_router_match_the_scenario(sim: OpenStackSimHandle, conn: Any) -> None:
    private = conn.network.get_subnet(sim.seeded.private_subnet_id)
    public = conn.network.get_subnet(sim.seeded.public_subnet_id)
    external = [n.name for n in conn.network.networks(is_router_external=True)]
    router = conn.network.get_router(sim.seeded.router_id)
    router_ports = {p.device_owner: p for p in conn.network.ports(device_id=router.id)}

    assert (private.cidr, private.gateway_ip) == (TENANT_CIDR, TENANT_GATEWAY)
    assert public.cidr == EXTERNAL_CIDR
    assert external == ["public"]
    assert router.name == "router1"
    assert router.external_gateway_info["network_id"] == sim.seeded.public_network_id
    interface = router_ports["network:router_interface"]
    assert interface.fixed_ips[0]["ip_address"] == TENANT_GATEWAY
    assert interface.network_id == sim.seeded.private_network_id


def test_clouds_yaml_names_the_cloud_and_region(sim: OpenStackSimHandle) -> None:
    clouds = yaml.safe_load(sim.clouds_yaml_path.read_text())["clouds"]

    cloud = clouds["pyccm-sim"]
    assert cloud["region_name"] == "RegionOne"
    assert cloud["auth_type"] == "password"
    assert cloud["auth"]["auth_url"] == f"{sim.url}/identity/v3"
    assert clouds["pyccm-sim-appcred"]["auth_type"] == "v3applicationcredential"


def test_cloud_conf_has_upstream_sections_and_the_seeded_ids(sim: OpenStackSimHandle) -> None:
    conf = configparser.ConfigParser()
    conf.read(sim.cloud_conf_path)

    assert conf["Global"]["auth-url"] == f"{sim.url}/identity/v3"
    assert conf["Global"]["region"] == "RegionOne"
    assert conf["Global"]["domain-name"] == "Default"
    assert conf["LoadBalancer"]["floating-network-id"] == sim.seeded.public_network_id
    assert conf["LoadBalancer"]["subnet-id"] == sim.seeded.private_subnet_id
    assert conf["Route"]["router-id"] == sim.seeded.router_id
    assert json.loads(sim.ids_json_path.read_text())["router_id"] == sim.seeded.router_id


def test_reset_restores_the_seeded_cloud_with_the_same_ids(
    sim: OpenStackSimHandle, conn: Any
) -> None:
    before = {s.name: s.id for s in conn.compute.servers()}
    sim.delete_server("node-0000")
    conn.network.create_ip(floating_network_id=sim.seeded.public_network_id)

    sim.reset()

    assert {s.name: s.id for s in conn.compute.servers()} == before
    assert sim.inventory()["floatingip"] == 1
    assert sim.counters() == {}
