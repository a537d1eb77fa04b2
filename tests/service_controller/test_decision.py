"""The service worker's one decision (`decision.decide`, `decision.service_keys`), table by
table: pure functions of the Service, what this process last did and the claim, so each
row is one call with no cloud and no manager."""

from __future__ import annotations

import msgspec
import pytest

from pyccm.flags.load_balancer_class import LoadBalancerClasses
from pyccm.protocol.views import (
    LoadBalancerIngress,
    LoadBalancerStatus,
    Service,
    ServiceStatus,
)
from pyccm.workers.runtime.controller import Later
from pyccm.workers.service.decision import (
    Claim,
    Converged,
    Decision,
    Delete,
    Ensure,
    Nothing,
    Skip,
    decide,
    may_account_for_cloud_resources,
    members_moved,
    service_keys,
    spec_print,
)
from pyccm.workers.service.ledger import Synced
from pyccm.workers.service.policy import FINALIZER, Shard
from tests.support.services import make_service

KEY = "default/web"
CLAIM = Claim()
OURS = "example.com/ours"
THEIRS = "example.com/theirs"
BACKENDS = frozenset({("n1", "fake:///n1", (("InternalIP", "10.0.0.1"),))})


def edit(
    service: Service,
    *,
    finalizer: bool = False,
    ingress: bool = False,
    deleting: bool = False,
    kind: str | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    uid: str | None = None,
) -> Service:
    meta = msgspec.structs.replace(
        service.metadata,
        finalizers=(FINALIZER,) if finalizer else service.metadata.finalizers,
        deletion_timestamp="2026-11-27T00:00:00Z" if deleting else None,
        annotations=service.metadata.annotations if annotations is None else annotations,
        labels=service.metadata.labels if labels is None else labels,
        uid=service.metadata.uid if uid is None else uid,
    )
    spec = service.spec if kind is None else msgspec.structs.replace(service.spec, type=kind)
    status = service.status
    if ingress:
        address = (LoadBalancerIngress(ip="192.0.2.7"),)
        status = ServiceStatus(load_balancer=LoadBalancerStatus(ingress=address))
    return msgspec.structs.replace(service, metadata=meta, spec=spec, status=status)


def converged(service: Service | None = None, *, claim: Claim = CLAIM) -> tuple[Service, Synced]:
    """A Service this process ensured: our finalizer, an ingress, its print recorded."""
    done = edit(service or make_service(), finalizer=True, ingress=True)
    return done, Synced(
        service=done,
        spec=spec_print(done, classes=claim.classes),
        backends=BACKENDS,
        ingress=done.status.load_balancer.ingress,
    )


# --- decide: what a sync must do -----------------------------------------------------------


def test_a_new_service_is_ensured_with_our_finalizer_first_and_events() -> None:
    plan = decide(KEY, make_service(), None, claim=CLAIM)
    assert isinstance(plan.step, Ensure)
    assert (plan.step.add_finalizer, plan.step.announce) == (True, True)
    assert (plan.replaced, plan.forget) == (None, False)


def test_an_already_converged_service_needs_nothing_but_its_members_checked() -> None:
    service, last = converged()
    assert decide(KEY, service, last, claim=CLAIM) == Decision(
        step=Converged(spec=last.spec or (), given=BACKENDS)
    )


@pytest.mark.parametrize(
    "change",
    [
        {"labels": {"team": "a"}},  # not in upstream's needsUpdate
        {"ingress": True},  # the echo of our own status write
    ],
)
def test_changes_outside_the_print_leave_it_converged(change: dict[str, object]) -> None:
    service, last = converged()
    assert isinstance(decide(KEY, edit(service, **change), last, claim=CLAIM).step, Converged)  # type: ignore[arg-type]


def with_ingress(service: Service, *ingress: LoadBalancerIngress) -> Service:
    status = ServiceStatus(load_balancer=LoadBalancerStatus(ingress=ingress))
    return msgspec.structs.replace(service, status=status)


@pytest.mark.parametrize(
    "ingress",
    [
        (),  # cleared: a GitOps tool applied the Service without its status
        (LoadBalancerIngress(ip="198.51.100.9"),),  # another address
        (LoadBalancerIngress(ip="192.0.2.7", ip_mode="Proxy"),),  # the same, another mode
    ],
)
def test_a_status_another_writer_changed_is_a_quiet_ensure(
    ingress: tuple[LoadBalancerIngress, ...],
) -> None:
    service, last = converged()
    step = decide(KEY, with_ingress(service, *ingress), last, claim=CLAIM).step
    assert step == Ensure(spec=last.spec or (), announce=False, add_finalizer=False)


def test_an_annotation_change_is_an_announced_ensure_without_a_second_finalizer() -> None:
    service, last = converged()
    changed = edit(service, annotations={"loadbalancer.openstack.org/timeout-client-data": "9"})
    step = decide(KEY, changed, last, claim=CLAIM).step
    assert step == Ensure(
        spec=spec_print(changed, classes=CLAIM.classes), announce=True, add_finalizer=False
    )


def test_a_port_change_is_an_announced_ensure() -> None:
    service, last = converged()
    ports = msgspec.structs.replace(service.spec, ports=make_service(ports=(80, 443)).spec.ports)
    step = decide(KEY, msgspec.structs.replace(service, spec=ports), last, claim=CLAIM).step
    assert isinstance(step, Ensure)
    assert step.announce


def test_a_drift_resync_is_a_quiet_ensure() -> None:
    service, last = converged()
    step = decide(KEY, service, last, claim=CLAIM, resync_due=True).step
    assert step == Ensure(spec=last.spec or (), announce=False, add_finalizer=False)


def test_an_ensure_still_to_finish_or_a_failed_member_update_ensures_again() -> None:
    service, _ = converged()
    unfinished = Synced(service=service, spec=None, backends=frozenset(), ingress=())
    step = decide(KEY, service, unfinished, claim=CLAIM).step
    assert isinstance(step, Ensure)
    assert step.announce


def test_a_service_an_earlier_process_converged_is_verified_without_events() -> None:
    service, _ = converged()
    step = decide(KEY, service, None, claim=CLAIM).step
    assert isinstance(step, Ensure)
    assert (step.announce, step.add_finalizer) == (False, False)


def test_a_service_with_our_finalizer_but_no_address_yet_is_announced() -> None:
    step = decide(KEY, edit(make_service(), finalizer=True), None, claim=CLAIM).step
    assert isinstance(step, Ensure)
    assert (step.announce, step.add_finalizer) == (True, False)


@pytest.mark.parametrize(
    "going",
    [{"deleting": True}, {"kind": "ClusterIP"}, {"kind": "NodePort"}],
    ids=["deletion-timestamp", "to-cluster-ip", "to-node-port"],
)
def test_our_finalizer_on_a_service_going_away_is_a_delete_that_clears_and_drops_it(
    going: dict[str, object],
) -> None:
    service, last = converged()
    step = decide(KEY, edit(service, **going), last, claim=CLAIM).step  # type: ignore[arg-type]
    assert step == Delete(clear_ingress=True, patch=True)


def test_a_service_going_away_that_this_process_never_saw_is_still_cleaned_up() -> None:
    service, _ = converged()
    assert decide(KEY, edit(service, deleting=True), None, claim=CLAIM).step == Delete(
        clear_ingress=True, patch=True
    )


def test_a_switch_away_whose_finalizer_is_already_gone_clears_the_ingress_only() -> None:
    # Synced by this process, then a user stripped the finalizer and changed the type.
    _, last = converged()
    cluster_ip = edit(make_service(kind="ClusterIP"), ingress=True)
    assert decide(KEY, cluster_ip, last, claim=CLAIM).step == Delete(clear_ingress=True, patch=True)
    bare = make_service(kind="ClusterIP")
    assert decide(KEY, bare, last, claim=CLAIM).step == Delete(clear_ingress=False, patch=False)


def test_a_cleanup_that_landed_is_not_repeated_before_its_echo() -> None:
    service, _ = converged()
    deleting = edit(service, deleting=True)
    step = decide(KEY, deleting, None, claim=CLAIM, cleaned_uid=deleting.metadata.uid).step
    assert isinstance(step, Nothing)
    # Another UID under the same key (re-created meanwhile) is cleaned up as usual.
    other = decide(KEY, deleting, None, claim=CLAIM, cleaned_uid="uid-before").step
    assert isinstance(other, Delete)


@pytest.mark.parametrize("kind", ["ClusterIP", "NodePort", "ExternalName"])
def test_another_type_with_nothing_of_ours_is_skipped(kind: str) -> None:
    step = decide(KEY, make_service(kind=kind), None, claim=CLAIM).step
    assert step == Skip(f"type {kind}")


@pytest.mark.parametrize(
    ("claim", "lb_class", "wanted"),
    [
        (Claim(), None, True),
        (Claim(), OURS, False),
        (Claim(classes=LoadBalancerClasses(name=OURS)), OURS, True),
        (Claim(classes=LoadBalancerClasses(name=OURS)), None, True),
        (Claim(classes=LoadBalancerClasses(name=OURS)), THEIRS, False),
        (Claim(classes=LoadBalancerClasses(name=OURS, only=True)), None, False),
        (Claim(classes=LoadBalancerClasses(name=OURS, only=True)), OURS, True),
    ],
)
def test_the_load_balancer_class_decides_whether_a_new_service_is_ours(
    claim: Claim, lb_class: str | None, wanted: bool
) -> None:
    step = decide(KEY, make_service(lb_class=lb_class), None, claim=claim).step
    assert isinstance(step, Ensure) == wanted
    assert isinstance(step, Skip) == (not wanted)


def test_another_class_holding_our_finalizer_is_left_alone_while_it_lives() -> None:
    theirs = edit(make_service(lb_class=THEIRS), finalizer=True, ingress=True)
    assert isinstance(decide(KEY, theirs, None, claim=CLAIM).step, Skip)
    # Once deleted: our finalizer goes, the other controller's status stays, after its
    # owner had the time to remove the finalizer itself (it is most likely the owner's).
    gone = edit(theirs, deleting=True)
    assert decide(KEY, gone, None, claim=CLAIM).step == Delete(
        clear_ingress=False, patch=True, wait_for_owner=True
    )


def test_a_service_we_served_that_turns_up_in_another_class_loses_our_lb_not_its_status() -> None:
    service, last = converged()
    spec = msgspec.structs.replace(service.spec, load_balancer_class=THEIRS)
    theirs = msgspec.structs.replace(service, spec=spec)
    assert decide(KEY, theirs, last, claim=CLAIM).step == Delete(clear_ingress=False, patch=True)


def test_a_claimed_class_without_our_record_but_with_an_ingress_is_cleaned_up() -> None:
    # A worker restarted between a type change and its cleanup: the status is ours.
    cluster_ip = edit(make_service(kind="ClusterIP"), ingress=True)
    assert decide(KEY, cluster_ip, None, claim=CLAIM).step == Delete(clear_ingress=True, patch=True)


def test_a_service_gone_without_our_finalizer_takes_the_copy_we_acted_on_with_it() -> None:
    _, last = converged()
    assert decide(KEY, None, last, claim=CLAIM) == Decision(
        step=Nothing("gone"), replaced=last.service, forget=True
    )
    assert decide(KEY, None, None, claim=CLAIM).replaced is None


def test_a_service_re_created_under_a_new_uid_replaces_the_old_load_balancer_first() -> None:
    _, last = converged()
    second = make_service(uid="uid-second")
    plan = decide(KEY, second, last, claim=CLAIM, cleaned_uid="uid-web")
    assert (plan.replaced, plan.forget) == (last.service, True)
    assert plan.step == Ensure(
        spec=spec_print(second, classes=CLAIM.classes), announce=True, add_finalizer=True
    )


def test_a_copy_that_wanted_no_load_balancer_is_not_replaced() -> None:
    other_type = Synced(
        service=make_service(kind="ClusterIP"), spec=None, backends=frozenset(), ingress=()
    )
    plan = decide(KEY, None, other_type, claim=CLAIM)
    assert (plan.replaced, plan.forget) == (None, True)


def test_another_shards_key_is_skipped() -> None:
    shards = [Claim(shard=Shard(i, 2)) for i in range(2)]
    steps = [decide(KEY, make_service(), None, claim=claim).step for claim in shards]
    assert sorted(type(step).__name__ for step in steps) == ["Ensure", "Skip"]


def test_members_moved_on_identity_first_then_on_equality() -> None:
    same = frozenset(BACKENDS)
    assert not members_moved(BACKENDS, BACKENDS)
    assert not members_moved(BACKENDS, same)
    assert members_moved(BACKENDS, frozenset())


@pytest.mark.parametrize(
    ("service", "accounts"),
    [
        (make_service(), True),
        (make_service(lb_class=THEIRS), True),  # gc knows no claim: never an orphan
        (make_service(kind="ClusterIP"), False),
        (edit(make_service(kind="ClusterIP"), finalizer=True), True),  # cleanup to come
    ],
    ids=["load-balancer", "another-class", "cluster-ip", "cluster-ip-with-our-finalizer"],
)
def test_which_live_services_account_for_cloud_resources(service: Service, accounts: bool) -> None:
    assert may_account_for_cloud_resources(service) == accounts


# --- service_keys: which Service changes enqueue a key --------------------------------------


def test_a_new_or_changed_load_balancer_service_is_enqueued() -> None:
    service = make_service()
    assert service_keys(KEY, None, service, known=False, claim=CLAIM) == (KEY,)
    assert service_keys(KEY, service, service, known=True, claim=CLAIM) == (KEY,)


def test_a_service_an_earlier_process_converged_waits_in_the_later_lane() -> None:
    service, _ = converged()
    (key,) = service_keys(KEY, None, service, known=False, claim=CLAIM)
    assert type(key) is Later
    # Known to this process (a replayed snapshot): the ordinary lane.
    (again,) = service_keys(KEY, None, service, known=True, claim=CLAIM)
    assert type(again) is str


def test_a_deleted_service_is_enqueued_only_if_this_process_acted_on_it() -> None:
    assert service_keys(KEY, make_service(), None, known=True, claim=CLAIM) == (KEY,)
    assert service_keys(KEY, make_service(), None, known=False, claim=CLAIM) == ()


def test_a_switch_away_and_a_cleanup_are_enqueued_other_types_are_not() -> None:
    lb = make_service()
    cluster_ip = make_service(kind="ClusterIP")
    assert service_keys(KEY, lb, cluster_ip, known=False, claim=CLAIM) == (KEY,)
    held = edit(cluster_ip, finalizer=True)
    assert service_keys(KEY, cluster_ip, held, known=False, claim=CLAIM) == (KEY,)
    assert service_keys(KEY, cluster_ip, cluster_ip, known=False, claim=CLAIM) == ()
    theirs = make_service(lb_class=THEIRS)
    assert service_keys(KEY, None, theirs, known=False, claim=CLAIM) == ()


def test_another_shards_service_enqueues_nothing() -> None:
    claims = [Claim(shard=Shard(i, 2)) for i in range(2)]
    keys = [service_keys(KEY, None, make_service(), known=False, claim=c) for c in claims]
    assert sorted(keys) == [(), (KEY,)]
