"""On an Octavia whose API version is below what a feature needs, pyccm refuses that one thing
with a Warning that names the version the feature needs and the version this Octavia
offers, and serves the rest: the Service that asked for it is refused, or the
one setting is ignored, while the Services that did not ask get their load balancers.

The service controller runs on the Octavia provider and the OpenStack simulator, told to
offer an older API version (`octavia_version`); its Warnings are what a user sees on the
Service. 2024.1's Octavia 14 offers 2.28, so every gate is on there
(docs/openstack-releases.md): these versions are older clouds'.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pyccm.protocol.messages import RecordEvent
from pyccm.protocol.views import Service
from pyccm.provider.openstack.common.features import OctaviaFeatures
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.provider_lb.sharing import apply, lb_id_of, sharing
from tests.support.lb import MakeLbs, nodes, one, service, writes
from tests.support.services import Harness, harness

P = "loadbalancer.openstack.org/"
PLAIN = "kube_service_kubernetes_default_plain"


def on_octavia(sim: OpenStackSimHandle, make_lbs: MakeLbs, version: str) -> Harness:
    """The service controller on an Octavia offering API `version`, three nodes."""
    sim.set_knobs(octavia_version=version)
    controller = harness(nodes=0, load_balancers=make_lbs())
    for node in nodes(3, sim=sim):
        controller.put(node)
    return controller


def warnings_of(h: Harness, svc: Service) -> tuple[RecordEvent, ...]:
    """Syncs `svc` until it settles; its Warnings, whether the sync failed or succeeded."""
    before = len(h.commits)
    failed = apply(h, svc)
    recorded = tuple(
        action
        for commit in h.commits[before:]
        for action in commit.actions
        if isinstance(action, RecordEvent) and action.type == "Warning"
    )
    return failed or recorded


def served_plain(h: Harness, sim: OpenStackSimHandle) -> None:
    """A Service that asks for nothing the old Octavia lacks gets its load balancer."""
    assert warnings_of(h, service("plain", ports=((80, 30080, "TCP"),))) == ()
    assert [lb["name"] for lb in sim.resources("loadbalancer") if lb["name"] == PLAIN] == [PLAIN]


REFUSED = "Error syncing load balancer: "
NOTHING = "; no load balancer is created or changed"


@pytest.mark.parametrize(
    ("version", "svc", "message"),
    [
        (
            "2.22",
            service("sctp", ports=((80, 30080, "TCP"), (3868, 31868, "SCTP"))),
            f"{REFUSED}SCTP port 3868 needs Octavia API 2.23 (SCTP listeners and pools); "
            f"this Octavia offers API 2.22{NOTHING}",
        ),
        (
            "2.11",
            service(
                "ranges", ports=((80, 30080, "TCP"),), load_balancer_source_ranges=("10.1.0.0/16",)
            ),
            f"{REFUSED}default/ranges restricts its source ranges: enforcing them needs "
            f"Octavia API 2.12 (listeners' allowed_cidrs); this Octavia offers API 2.11{NOTHING}",
        ),
    ],
    ids=["sctp", "source-ranges"],
)
def test_a_service_asking_for_what_octavia_lacks_is_refused_and_the_rest_served(
    sim: OpenStackSimHandle, make_lbs: MakeLbs, version: str, svc: Service, message: str
) -> None:
    h = on_octavia(sim, make_lbs, version)
    mark = sim.mark()

    (warning,) = warnings_of(h, svc)

    assert (warning.reason, warning.message) == ("SyncLoadBalancerFailed", message)
    assert writes(sim, mark) == []
    served_plain(h, sim)


@dataclass(frozen=True)
class Ignored:
    version: str
    annotation: dict[str, str]
    field: str  # the load balancer's field the setting would have filled
    reason: str
    message: str


@pytest.mark.parametrize(
    "case",
    [
        Ignored(
            "2.13",
            {P + "availability-zone": "az-2"},
            "availability_zone",
            "LoadBalancerAvailabilityZonesIgnored",
            "availability zone 'az-2' ignored: it needs Octavia API 2.14 (availability zones); "
            "this Octavia offers API 2.13",
        ),
        Ignored(
            "2.5",
            {P + "flavor-id": "f-small"},
            "flavor_id",
            "LoadBalancerFlavorIgnored",
            "flavor 'f-small' ignored: it needs Octavia API 2.6 (flavors); "
            "this Octavia offers API 2.5",
        ),
    ],
    ids=["availability-zone", "flavor"],
)
def test_a_setting_octavia_lacks_is_ignored_with_a_warning_and_the_service_served(
    sim: OpenStackSimHandle, make_lbs: MakeLbs, case: Ignored
) -> None:
    h = on_octavia(sim, make_lbs, case.version)
    svc = service("asks", ports=((80, 30080, "TCP"),), annotations=case.annotation)

    (warning,) = warnings_of(h, svc)

    assert (warning.reason, warning.message) == (case.reason, case.message)
    assert one(sim, "loadbalancer")[case.field] is None
    assert one(sim, "listener")["protocol_port"] == 80


def test_sharing_a_load_balancer_without_tags_is_refused_and_the_owner_served(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    h = on_octavia(sim, make_lbs, "2.4")
    assert warnings_of(h, service("owner", ports=((80, 30080, "TCP"),))) == ()
    lb_id = lb_id_of(h, "default/owner")
    mark = sim.mark()

    (warning,) = warnings_of(h, sharing("guest", 8080, lb_id))

    assert (warning.reason, warning.message) == (
        "SyncLoadBalancerFailed",
        f"{REFUSED}sharing a load balancer needs Octavia API 2.5 (tags); "
        "this Octavia offers API 2.4",
    )
    assert writes(sim, mark) == []
    assert [li["protocol_port"] for li in sim.resources("listener")] == [80]


@pytest.mark.parametrize(
    ("features", "gate", "why"),
    [
        (
            OctaviaFeatures(version=(2, 30), lb_provider="ovn"),
            "availability_zones",
            "needs Octavia API 2.14 (availability zones) and a provider other than ovn; "
            "this Octavia offers API 2.30, with the ovn provider",
        ),
        (
            OctaviaFeatures(version=None),
            "sctp",
            "needs Octavia API 2.23 (SCTP listeners and pools); "
            "this Octavia offers no readable API version",
        ),
    ],
    ids=["ovn", "no-version-document"],
)
def test_the_reason_names_ovn_or_a_missing_version_document(
    features: OctaviaFeatures, gate: str, why: str
) -> None:
    assert not features.has(gate)
    assert features.lacking(gate) == why
