"""Two managers' electors on one Lease: one leads; a release hands over at the next retry."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest

from pyccm.kubeapi.client import KubeClient, KubeSettings
from pyccm.manager.election import ElectionSettings, Elector
from pyccm_sim.kube.testing import KubeSimHandle, running_kube_sim
from tests.support.waiting import eventually

# Short timings keep the test quick; the ratios are upstream's (lease > renew > 1.2 x retry).
FAST = ElectionSettings(lease_duration=3.0, renew_deadline=2.0, retry_period=0.2)


@pytest.fixture
def kube() -> Iterator[KubeSimHandle]:
    with running_kube_sim() as handle:
        yield handle


def elector(
    kube: KubeSimHandle,
    name: str,
    lost: threading.Event | None = None,
    started: Callable[[], None] = lambda: None,
) -> Elector:
    client = KubeClient(
        settings=KubeSettings(kubeconfig=str(kube.kubeconfig_path), qps=1000, burst=1000)
    )
    on_lost = lost.set if lost else (lambda: None)
    settings = ElectionSettings(
        lease_duration=FAST.lease_duration,
        renew_deadline=FAST.renew_deadline,
        retry_period=FAST.retry_period,
        identity=name,
    )
    return Elector(client=client, settings=settings, on_started=started, on_lost=on_lost)


def holder(kube: KubeSimHandle) -> str:
    lease = kube.get("leases", "cloud-controller-manager", "kube-system")
    return "" if lease is None else str(lease["spec"].get("holderIdentity") or "")


def test_exactly_one_of_two_candidates_leads(kube: KubeSimHandle) -> None:
    first, second = elector(kube, "a"), elector(kube, "b")
    first.start()
    second.start()
    try:
        eventually(lambda: first.leading.is_set() or second.leading.is_set())
        leader, standby = (first, second) if first.leading.is_set() else (second, first)
        assert holder(kube) == leader.identity
        assert not standby.leading.is_set()
    finally:
        first.stop()
        second.stop()


def test_a_released_lease_is_taken_over_without_waiting_for_expiry(kube: KubeSimHandle) -> None:
    first = elector(kube, "a")
    first.start()
    eventually(first.leading.is_set)
    second = elector(kube, "b")
    second.start()
    try:
        assert first.release()
        # Expiry would take the 3 s lease duration; a released lease goes at the next retry.
        eventually(second.leading.is_set, timeout=FAST.lease_duration - 0.5)
        assert holder(kube) == "b"
        lease = kube.get("leases", "cloud-controller-manager", "kube-system")
        assert lease is not None
        assert lease["spec"]["leaseTransitions"] == 1
    finally:
        second.stop()


def test_a_leader_that_cannot_renew_loses_the_lease(kube: KubeSimHandle) -> None:
    lost = threading.Event()
    first = elector(kube, "a", lost)
    first.start()
    eventually(first.leading.is_set)
    kube.set_faults(error_rates={"update": 1.0})
    eventually(lost.is_set, timeout=10)
    assert not first.leading.is_set()


def test_a_leader_whose_lease_is_taken_over_loses_and_leaves_it_alone(kube: KubeSimHandle) -> None:
    lost = threading.Event()
    first = elector(kube, "a", lost)
    first.start()
    try:
        eventually(first.leading.is_set)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        spec = {"holderIdentity": "b", "renewTime": now, "leaseDurationSeconds": 60}
        kube.patch(
            "leases",
            "cloud-controller-manager",
            json.dumps({"spec": spec}).encode(),
            namespace="kube-system",
            patch_type="application/merge-patch+json",
        )
        eventually(lost.is_set)
        # Its renewals must not have written over the new holder's record.
        assert holder(kube) == "b"
        assert not first.leading.is_set()
    finally:
        first.stop()


def test_a_leader_still_starting_up_keeps_renewing(kube: KubeSimHandle) -> None:
    # The new leader's start-up (cache sync, retried while every LIST
    # fails) ran on the elector's thread, so renewals stopped and the Lease was lost.
    lost = threading.Event()
    release = threading.Event()
    renewals: list[str] = []

    def start_slowly() -> None:
        release.wait(30)

    leader = elector(kube, "slow-starter", lost, started=start_slowly)
    leader.start()
    try:
        eventually(leader.leading.is_set)

        def renewed() -> bool:
            lease = kube.get("leases", "cloud-controller-manager", "kube-system")
            stamp = "" if lease is None else str(lease["spec"].get("renewTime") or "")
            if stamp and stamp not in renewals:
                renewals.append(stamp)
            return len(renewals) >= 3

        # Several renewals while on_started is still blocked, and the Lease kept.
        eventually(renewed)
        assert not lost.is_set()
        assert holder(kube) == "slow-starter"
    finally:
        release.set()
        leader.stop()
