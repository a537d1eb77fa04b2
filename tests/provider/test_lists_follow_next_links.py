"""Every list the provider reads is read whole: `list_all` follows the "next" link of each
page (Neutron pages when asked with `limit`; Octavia and Nova page on their own past 1,000
items), asking the same endpoint with the link's marker."""

from __future__ import annotations

from pyccm.provider.openstack.common.resources import Port
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.openstack import SEED_NODES, MakeCloud


def test_a_paged_port_list_is_read_to_its_last_page(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    client = make_cloud().cloud.client
    everything = sim.resources("port")

    mark = sim.mark()
    ports = client.list_all(
        Port, "network", "/ports", key="ports", request="port_list", params={"limit": 2}
    )

    assert sorted(p.id for p in ports) == sorted(p["id"] for p in everything)
    assert len(everything) > SEED_NODES  # more than two pages
    pages = [c for c in sim.calls(since=mark) if c.path.startswith("/network/v2.0/ports")]
    assert len(pages) >= len(everything) // 2
    assert all("limit=2" in c.path for c in pages)
    assert sum("marker=" in c.path for c in pages) == len(pages) - 1
