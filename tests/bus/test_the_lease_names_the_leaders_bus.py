"""The leader writes its advertised bus addresses on the Lease in the writes it makes anyway;
a standby reads them there, forgets them once the holder stops renewing, and a release
takes them away."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from pyccm.flags.addresses import BUS_ENDPOINTS_ANNOTATION
from pyccm.kubeapi.client import MERGE_PATCH, KubeClient, KubeSettings
from pyccm.manager.election import ElectionSettings, Elector
from pyccm_sim.kube.testing import KubeSimHandle, running_kube_sim
from tests.support.waiting import eventually

LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
A_BUS = ("tcp://10.0.0.5:5556", "tcp://10.0.0.5:5557")


@pytest.fixture
def kube() -> Iterator[KubeSimHandle]:
    with running_kube_sim() as handle:
        yield handle


def elector(
    kube: KubeSimHandle,
    name: str,
    bus: tuple[str, str] | None = None,
    *,
    lease: float = 3.0,
) -> Elector:
    client = KubeClient(
        settings=KubeSettings(kubeconfig=str(kube.kubeconfig_path), qps=1000, burst=1000)
    )
    settings = ElectionSettings(
        lease_duration=lease,
        renew_deadline=2.0,
        retry_period=0.2,
        identity=name,
        bus_endpoints=bus,
    )
    return Elector(client=client, settings=settings, on_started=lambda: None, on_lost=lambda: None)


def lease_annotations(kube: KubeSimHandle) -> dict[str, str]:
    lease = kube.get("leases", "cloud-controller-manager", "kube-system")
    assert lease is not None
    return dict(lease["metadata"].get("annotations") or {})


def test_the_leader_writes_its_bus_on_the_lease_and_a_standby_reads_it(
    kube: KubeSimHandle,
) -> None:
    leader = elector(kube, "a", A_BUS)
    leader.start()
    eventually(leader.leading.is_set)
    standby = elector(kube, "b")
    standby.start()
    try:
        assert lease_annotations(kube)[BUS_ENDPOINTS_ANNOTATION] == ",".join(A_BUS)
        eventually(lambda: standby.leader_bus() == A_BUS)
        # Someone else's annotation survives the renewals (a PUT writes back what it read).
        patch = {"metadata": {"annotations": {"example.com/owner": "platform"}}}
        kube.patch(
            "leases",
            "cloud-controller-manager",
            json.dumps(patch).encode(),
            namespace="kube-system",
            patch_type=MERGE_PATCH,
        )
        renewed = kube.resource_version
        eventually(lambda: kube.resource_version > renewed + 3)
        assert lease_annotations(kube) == {
            BUS_ENDPOINTS_ANNOTATION: ",".join(A_BUS),
            "example.com/owner": "platform",
        }
        # No request of its own (no PATCH): it rides on the create and the renewals' PUTs.
        verbs = {r["method"] for r in kube.requests() if r["path"].startswith(LEASES)}
        assert verbs == {"GET", "POST", "PUT"}
    finally:
        standby.stop()
        leader.stop()


def test_a_release_takes_the_bus_off_the_lease(kube: KubeSimHandle) -> None:
    leader = elector(kube, "a", A_BUS)
    leader.start()
    eventually(leader.leading.is_set)
    successor = elector(kube, "b")
    successor.start()
    try:
        assert leader.release()
        assert BUS_ENDPOINTS_ANNOTATION not in lease_annotations(kube)
        eventually(successor.leading.is_set)
        # The new holder advertises nothing, so nothing names the old leader's bus.
        assert BUS_ENDPOINTS_ANNOTATION not in lease_annotations(kube)
        assert successor.leader_bus() is None
    finally:
        successor.stop()


def test_a_standby_stops_naming_a_leader_that_no_longer_renews(kube: KubeSimHandle) -> None:
    # A long lease: the standby must stop naming the silent holder (after the 2 s renew
    # deadline) well before it may take the Lease (6 s).
    leader = elector(kube, "a", A_BUS, lease=6.0)
    leader.start()
    eventually(leader.leading.is_set)
    standby = elector(kube, "b", lease=6.0)
    standby.start()
    try:
        eventually(lambda: standby.leader_bus() == A_BUS)
        leader.stop()  # dead: no release, no more renewals
        eventually(lambda: standby.leader_bus() is None, timeout=5)
        assert not standby.leading.is_set()
        assert lease_annotations(kube)[BUS_ENDPOINTS_ANNOTATION] == ",".join(A_BUS)
    finally:
        standby.stop()
