"""Node i has one name, one InternalIP and one podCIDR, whichever simulator asks."""

import pytest

from pyccm_sim.scenario import node_pod_cidr, seed_node, seed_nodes


def test_first_node_sits_after_the_reserved_addresses() -> None:
    node = seed_node(0)
    assert (node.name, node.internal_ip, node.pod_cidr) == (
        "node-0000",
        "10.0.0.10",
        "10.64.0.0/24",
    )


def test_node_addresses_cross_octet_boundaries() -> None:
    assert seed_node(300).internal_ip == "10.0.1.54"
    assert seed_node(300).pod_cidr == "10.65.44.0/24"


def test_five_thousand_nodes_are_distinct() -> None:
    nodes = seed_nodes(5000)
    assert len({n.internal_ip for n in nodes}) == 5000
    assert len({n.pod_cidr for n in nodes}) == 5000


def test_a_cluster_cidr_too_small_is_refused() -> None:
    with pytest.raises(ValueError, match="no /24 number 256"):
        node_pod_cidr(256, "10.244.0.0/16")
