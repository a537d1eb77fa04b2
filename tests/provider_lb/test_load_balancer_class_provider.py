"""`[LoadBalancerClass "x"]` takes `lb-provider`, `flavor-id` and `availability-zone` besides
its network keys (kubernetes/cloud-provider-openstack#2756: a provider per Service): the Service's
`loadbalancer.openstack.org/class` chooses them, its own annotations still win, and the
feature gates follow the class's provider (ovn: no HTTP monitors, no flavors)."""

from __future__ import annotations

import pytest

from pyccm.provider.errors import CloudError, ConfigError
from pyccm.provider.openstack.config import load_settings
from pyccm.provider.openstack.loadbalancer import service_annotations as a
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import MakeLbs, ensure, nodes, octavia_flavor, octavia_zone, one, service

CLASSES = """
[LoadBalancerClass "fast"]
lb-provider = ovn
availability-zone = az-fast

[LoadBalancerClass "big"]
flavor-id = {flavor}
availability-zone = az-big
"""

# The ovn provider balances by SOURCE_IP_PORT only (Octavia answers 501 to the others).
OVN = {a.CLASS: "fast", a.LB_METHOD: "SOURCE_IP_PORT"}


def test_the_class_chooses_provider_flavor_and_zone(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    # Octavia refuses a flavor or zone it does not have: the operator makes them first.
    conn = sim.connection()
    flavor = octavia_flavor(conn, "big")
    for zone in ("az-fast", "az-big", "az-own"):
        octavia_zone(conn, zone)
    lbs = make_lbs(CLASSES.format(flavor=flavor))

    ensure(lbs, service("plain", ports=((80, 30080, "TCP"),)), nodes(1))
    ensure(lbs, service("fast", ports=((80, 30081, "TCP"),), annotations=OVN), nodes(1))
    big = service(
        "big",
        ports=((80, 30082, "TCP"),),
        annotations={a.CLASS: "big", a.AVAILABILITY_ZONE: "az-own"},
    )
    ensure(lbs, big, nodes(1))

    found = {
        lb["name"].rsplit("_", 1)[1]: (lb["provider"], lb["flavor_id"], lb["availability_zone"])
        for lb in sim.resources("loadbalancer")
    }
    assert found == {
        "plain": ("amphora", None, None),
        # pyccm's gates give ovn no availability zones: ignored with a Warning.
        "fast": ("ovn", None, None),
        # The Service's own annotation beats its class.
        "big": ("amphora", flavor, "az-own"),
    }


def test_a_class_provider_that_is_not_its_flavors_fails_with_octavias_answer(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    flavor = octavia_flavor(sim.connection(), "big")
    lbs = make_lbs(f'[LoadBalancerClass "v2"]\nlb-provider = amphorav2\nflavor-id = {flavor}')

    svc = service(ports=((80, 30080, "TCP"),), annotations={a.CLASS: "v2"})
    with pytest.raises(CloudError, match=f"Flavor '{flavor}' is not compatible with provider "):
        ensure(lbs, svc, nodes(1))
    assert sim.inventory()["loadbalancer"] == 0


def test_the_feature_gates_follow_the_class_provider(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    lbs = make_lbs(CLASSES.format(flavor="3f0e8a34-0000-4000-8000-00000000b16f"))
    svc = service(
        ports=((80, 30080, "TCP"),),
        annotations={**OVN, a.FLAVOR_ID: "3f0e8a34-0000-4000-8000-00000000b16f"},
        external_traffic_policy="Local",
        health_check_node_port=32000,
    )

    outcome = ensure(lbs, svc, nodes(1))

    lb = one(sim, "loadbalancer")
    assert (lb["provider"], lb["flavor_id"]) == ("ovn", None)
    # ovn has no HTTP monitors: the Local Service's monitor is TCP.
    assert one(sim, "healthmonitor")["type"] == "TCP"
    assert sorted(e.reason for e in outcome.events) == [
        "LoadBalancerAvailabilityZonesIgnored",
        "LoadBalancerFlavorIgnored",
    ]


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("lb-provider = nginx", "unknown provider (value hidden)"),
        ("availability-zone = " + "z" * 256, "over 255"),
    ],
)
def test_a_bad_class_key_refuses_the_file(tmp_path: object, line: str, problem: str) -> None:
    path = tmp_path / "cloud.conf"  # type: ignore[operator]
    path.write_text(f'[Global]\nauth-url = http://k\n[LoadBalancerClass "x"]\n{line}\n')

    with pytest.raises(ConfigError) as failed:
        load_settings(path, environ={})

    assert 'LoadBalancerClass "x"' in str(failed.value)
    assert problem in str(failed.value)
