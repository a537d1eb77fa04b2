"""Seeds a cloud that matches a seeded cluster, and writes the configs to reach it.

Node `i` of `sim.scenario` becomes server `i`: same name, a port on the tenant network
whose fixed IP is the node's InternalIP (so route nexthops and member addresses line
up), a flavor and an availability zone. Around the servers: tenant network `private`
with the scenario's subnet, external network `public` with the floating-IP subnet, and
router `router1` joining them, which is exactly what a devstack cloud gives a CCM.
SHUTOFF, deleted and floating-IP variants exist for lifecycle and address scenarios.

`write_config` writes a `clouds.yaml` (cloud `pyccm-sim`, password auth, plus
`pyccm-sim-appcred`) and an upstream-style `cloud.conf`, so both openstacksdk users and
an operator's existing config style work unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from pyccm_sim.scenario import (
    CLUSTER_CIDR,
    EXTERNAL_CIDR,
    TENANT_CIDR,
    TENANT_CIDR_V6,
    TENANT_GATEWAY,
    TENANT_GATEWAY_V6,
    node_internal_ipv6,
    seed_node,
)

if TYPE_CHECKING:
    from pyccm_sim.openstack.neutron import Neutron
    from pyccm_sim.openstack.nova import Nova
    from pyccm_sim.openstack.settings import SimSettings
    from pyccm_sim.openstack.store import Record

CLOUD_NAME = "pyccm-sim"
APPCRED_CLOUD_NAME = "pyccm-sim-appcred"
# (id, name, vcpus, ram MiB, disk GiB): devstack's m1 flavors.
FLAVORS = (
    ("1", "m1.tiny", 1, 512, 1),
    ("2", "m1.small", 1, 2048, 20),
    ("3", "m1.medium", 2, 4096, 40),
    ("4", "m1.large", 4, 8192, 80),
)
# Dynamic addresses (load-balancer VIPs, extra ports) come from the top quarter of the
# tenant subnet, far above the node addresses the scenario hands out from .0.10 upwards.
TENANT_POOL = ("10.0.192.0", "10.0.255.254")
TENANT_POOL_V6 = ("fd00:10::c000", "fd00:10::ffff")
EXTERNAL_GATEWAY = "172.24.4.1"
EXTERNAL_POOL = ("172.24.4.2", "172.24.7.254")


@dataclass(frozen=True)
class SeedSpec:
    """Which cloud to build; node indexes refer to `sim.scenario.seed_node`."""

    nodes: int = 0
    shutoff: frozenset[int] = frozenset()
    # Nodes the cluster has but the cloud does not (their servers were deleted).
    deleted: frozenset[int] = frozenset()
    floating_ips: frozenset[int] = frozenset()
    # Node i is in zones[i % len(zones)]; "nova" is Nova's default zone name.
    zones: tuple[str, ...] = ("nova",)
    flavor_id: str = "3"
    cluster_cidr: str = CLUSTER_CIDR
    # The tenant network also has an IPv6 subnet, and every node port an address in it
    # (dual-stack Services); off, the cloud is the IPv4-only one every scenario knew.
    dual_stack: bool = False


@dataclass(frozen=True)
class SeededCloud:
    """The ids a config file or a test needs to address the seeded cloud."""

    private_network_id: str
    private_subnet_id: str
    public_network_id: str
    public_subnet_id: str
    router_id: str
    flavor_id: str
    # The tenant network's IPv6 subnet ("" unless `SeedSpec.dual_stack`).
    private_subnet_v6_id: str = ""


def seed_cloud(*, nova: Nova, neutron: Neutron, spec: SeedSpec) -> SeededCloud:
    for flavor_id, name, vcpus, ram, disk in FLAVORS:
        nova.create_flavor(flavor_id, name, vcpus=vcpus, ram=ram, disk=disk)
    private = neutron.create_network("private")
    private_subnet = neutron.create_subnet(
        private["id"], "private-subnet", TENANT_CIDR, gateway_ip=TENANT_GATEWAY, pool=TENANT_POOL
    )
    private_v6 = ""
    if spec.dual_stack:
        private_v6 = neutron.create_subnet(
            private["id"],
            "private-subnet-v6",
            TENANT_CIDR_V6,
            gateway_ip=TENANT_GATEWAY_V6,
            pool=TENANT_POOL_V6,
        )["id"]
    public = neutron.create_network("public", external=True)
    public_subnet = neutron.create_subnet(
        public["id"],
        "public-subnet",
        EXTERNAL_CIDR,
        gateway_ip=EXTERNAL_GATEWAY,
        pool=EXTERNAL_POOL,
    )
    router = neutron.create_router("router1", external_network_id=public["id"])
    neutron.add_router_interface(router["id"], private_subnet["id"])
    seeded = SeededCloud(
        private_network_id=private["id"],
        private_subnet_id=private_subnet["id"],
        public_network_id=public["id"],
        public_subnet_id=public_subnet["id"],
        router_id=router["id"],
        flavor_id=spec.flavor_id,
        private_subnet_v6_id=private_v6,
    )
    for index in range(spec.nodes):
        if index in spec.deleted:
            continue
        add_node_server(
            nova=nova,
            neutron=neutron,
            seeded=seeded,
            index=index,
            status="SHUTOFF" if index in spec.shutoff else "ACTIVE",
            floating_ip=index in spec.floating_ips,
            zone=spec.zones[index % len(spec.zones)],
            cluster_cidr=spec.cluster_cidr,
        )
    return seeded


def add_node_server(
    *,
    nova: Nova,
    neutron: Neutron,
    seeded: SeededCloud,
    index: int,
    status: str,
    floating_ip: bool,
    zone: str,
    cluster_cidr: str = CLUSTER_CIDR,
) -> Record:
    node = seed_node(index, cluster_cidr)
    server = nova.create_server(
        node.name,
        flavor_id=seeded.flavor_id,
        zone=zone,
        network_id=seeded.private_network_id,
        fixed_ip=node.internal_ip,
        status=status,
    )
    if seeded.private_subnet_v6_id:
        (port,) = neutron.ports_of_device(server["id"])
        neutron.add_fixed_ip(port["id"], seeded.private_subnet_v6_id, node_internal_ipv6(index))
    if floating_ip:
        (port,) = neutron.ports_of_device(server["id"])
        neutron.create_floating_ip(
            {"floating_network_id": seeded.public_network_id, "port_id": port["id"]}
        )
    return server


@dataclass(frozen=True)
class ConfigPaths:
    clouds_yaml: Path
    cloud_conf: Path
    ids_json: Path


def write_config(
    directory: Path, *, url: str, settings: SimSettings, seeded: SeededCloud, app_credential_id: str
) -> ConfigPaths:
    """Write clouds.yaml, cloud.conf and openstack-sim.json for the cloud at `url`."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = ConfigPaths(
        directory / "clouds.yaml", directory / "cloud.conf", directory / "openstack-sim.json"
    )
    paths.clouds_yaml.write_text(
        yaml.safe_dump(_clouds(url, settings, app_credential_id), sort_keys=False)
    )
    paths.cloud_conf.write_text(_cloud_conf(url, settings, seeded))
    ids = {"url": url, "cloud": CLOUD_NAME, "region": settings.region, **vars(seeded)}
    paths.ids_json.write_text(json.dumps(ids, indent=2) + "\n")
    for path in (paths.clouds_yaml, paths.cloud_conf):
        path.chmod(0o600)  # they hold credentials
    return paths


def _clouds(url: str, settings: SimSettings, app_credential_id: str) -> dict[str, object]:
    creds = settings.credentials
    common = {"region_name": settings.region, "interface": "public", "identity_api_version": 3}
    password_auth = {
        "auth_url": f"{url}/identity/v3",
        "username": creds.username,
        "password": creds.password,
        "project_name": creds.project_name,
        "user_domain_name": creds.domain_name,
        "project_domain_name": creds.domain_name,
    }
    appcred_auth = {
        "auth_url": f"{url}/identity/v3",
        "application_credential_id": app_credential_id,
        "application_credential_secret": creds.app_credential_secret,
    }
    return {
        "clouds": {
            CLOUD_NAME: {"auth_type": "password", "auth": password_auth, **common},
            APPCRED_CLOUD_NAME: {
                "auth_type": "v3applicationcredential",
                "auth": appcred_auth,
                **common,
            },
        }
    }


def _cloud_conf(url: str, settings: SimSettings, seeded: SeededCloud) -> str:
    creds = settings.credentials
    return "\n".join(
        [
            "# Written by `pyccm sim openstack --write-config`; upstream cloud.conf keys.",
            "[Global]",
            f"auth-url = {url}/identity/v3",
            f"username = {creds.username}",
            f"password = {creds.password}",
            f"tenant-name = {creds.project_name}",
            f"domain-name = {creds.domain_name}",
            f"region = {settings.region}",
            "",
            "[LoadBalancer]",
            f"floating-network-id = {seeded.public_network_id}",
            f"subnet-id = {seeded.private_subnet_id}",
            "lb-provider = amphora",
            "",
            "[Route]",
            f"router-id = {seeded.router_id}",
            "",
        ]
    )
