"""The one listing of Neutron ports: `GET /v2.0/ports` with the given filters, every page.

A filter with a list value repeats its key, which Neutron ORs (`device_id=a&device_id=b`).
The instances list a server's ports (or a batch of servers'), the routes a router's and an
address's, the load balancers a node's and a security group's.
"""

from __future__ import annotations

from pyccm.provider.openstack.common.resources import Port
from pyccm.provider.openstack.transport.client import OpenStackClient, Params


def list_ports(client: OpenStackClient, params: Params) -> list[Port]:
    return client.list_all(
        Port, "network", "/ports", key="ports", request="port_list", params=params
    )
