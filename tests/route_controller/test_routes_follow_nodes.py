"""Routes on the cloud router follow the nodes' podCIDRs and addresses
(pyccm/workers/route/README.md)."""

from __future__ import annotations

import ipaddress

from pyccm.workers.route.controller import RouteSettings
from pyccm_sim.fake_provider import FakeCloud
from tests.support.routes import Harness, build, make_node


def seed_route(cloud: FakeCloud, destination: str, next_hop: str) -> None:
    """A route put on the router by someone else (another cluster, an operator, a past run)."""
    cloud._routes[destination] = next_hop


def test_every_pod_cidr_gets_a_route_via_the_nodes_internal_ip(harness: Harness) -> None:
    harness.put(make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.11",)))
    harness.put(make_node("n2", cidrs=("10.244.2.0/24",), ips=("10.0.0.12",)))

    harness.reconcile()

    assert harness.cloud.route_table() == {
        "10.244.1.0/24": "10.0.0.11",
        "10.244.2.0/24": "10.0.0.12",
    }


def test_a_dual_stack_node_gets_one_route_per_family(harness: Harness) -> None:
    harness.put(
        make_node(
            "n1",
            cidrs=("10.244.1.0/24", "fd00:10:244:1::/64"),
            ips=("10.0.0.11", "fd00::11"),
        )
    )

    harness.reconcile()

    assert harness.cloud.route_table() == {
        "10.244.1.0/24": "10.0.0.11",
        "fd00:10:244:1::/64": "fd00::11",
    }


def test_a_second_reconcile_with_nothing_changed_only_lists(harness: Harness) -> None:
    harness.put(make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.11",)))
    harness.reconcile()
    calls_before = len(harness.cloud.calls)

    harness.reconcile()

    assert [c.method for c in harness.cloud.calls[calls_before:]] == ["routes_list"]


def test_a_removed_node_loses_its_route(harness: Harness) -> None:
    harness.put(make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.11",)))
    harness.put(make_node("n2", cidrs=("10.244.2.0/24",), ips=("10.0.0.12",)))
    harness.reconcile()

    harness.remove("n2")
    harness.reconcile()

    assert harness.cloud.route_table() == {"10.244.1.0/24": "10.0.0.11"}
    assert harness.cloud.calls_of("routes_delete") == ["10.244.2.0/24"]


def test_a_changed_pod_cidr_replaces_the_old_route(harness: Harness) -> None:
    harness.put(make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.11",)))
    harness.reconcile()

    harness.put(make_node("n1", cidrs=("10.244.9.0/24",), ips=("10.0.0.11",), version="2"))
    harness.reconcile()

    assert harness.cloud.route_table() == {"10.244.9.0/24": "10.0.0.11"}


def test_an_address_change_deletes_the_old_route_before_creating_the_new_one(
    harness: Harness,
) -> None:
    harness.put(make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.11",)))
    harness.reconcile()
    calls_before = len(harness.cloud.calls)

    harness.put(make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.99",), version="2"))
    harness.reconcile()

    assert harness.cloud.route_table() == {"10.244.1.0/24": "10.0.0.99"}
    # Both calls name the same destination: a create before the delete would be undone by it.
    assert [c.method for c in harness.cloud.calls[calls_before:]] == [
        "routes_list",
        "routes_delete_many",
        "routes_delete",
        "routes_create_many",
        "routes_create",
    ]


def test_a_route_outside_the_cluster_cidr_is_left_alone(harness: Harness) -> None:
    seed_route(harness.cloud, "192.168.50.0/24", "10.0.0.200")
    harness.put(make_node("n1", cidrs=("10.244.1.0/24",), ips=("10.0.0.11",)))

    harness.reconcile()

    assert harness.cloud.route_table()["192.168.50.0/24"] == "10.0.0.200"
    assert harness.cloud.calls_of("routes_delete") == []


def test_a_blackhole_inside_the_cluster_cidr_is_deleted(harness: Harness) -> None:
    seed_route(harness.cloud, "10.244.77.0/24", "10.0.0.250")  # no node owns 10.0.0.250

    harness.reconcile()

    assert harness.cloud.route_table() == {}
    assert harness.cloud.calls_of("routes_delete") == ["10.244.77.0/24"]


def test_a_route_with_an_unparsable_destination_is_ignored(harness: Harness) -> None:
    seed_route(harness.cloud, "not-a-cidr", "10.0.0.250")

    harness.reconcile()

    assert harness.cloud.route_table() == {"not-a-cidr": "10.0.0.250"}


def test_a_node_without_pod_cidrs_gets_no_route_and_no_condition(harness: Harness) -> None:
    harness.put(make_node("n1", ips=("10.0.0.11",)))

    actions = harness.reconcile()

    assert harness.cloud.calls_of("routes_create") == []
    assert actions == ()


def test_ipv6_cidrs_match_whatever_their_spelling(harness: Harness) -> None:
    seed_route(harness.cloud, "fd00:10:244:0001::/64", "fd00::11")
    harness.put(make_node("n1", cidrs=("fd00:10:244:1::/64",), ips=("fd00::11",)))

    harness.reconcile()

    assert harness.cloud.calls_of("routes_create") == []
    assert harness.cloud.calls_of("routes_delete") == []


def test_a_single_stack_cluster_leaves_the_other_family_alone() -> None:
    harness = build(
        FakeCloud(), RouteSettings(cluster_cidrs=(ipaddress.ip_network("10.244.0.0/16"),))
    )
    seed_route(harness.cloud, "fd00:10:244:5::/64", "fd00::250")

    harness.reconcile()

    assert harness.cloud.route_table() == {"fd00:10:244:5::/64": "fd00::250"}
