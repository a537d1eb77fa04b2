"""What a Service sync does, laid out before anything runs (`plan.make_plan`, pure), and
how the executor ends a stage: each kind of plan's operations, in order."""

from __future__ import annotations

import msgspec
from prometheus_client import REGISTRY

from pyccm.protocol.messages import (
    Ack,
    Action,
    ActionFailure,
    FailureKind,
    PatchServiceStatus,
    RecordEvent,
    ResultId,
    SessionId,
)
from pyccm.protocol.views import Service
from pyccm.workers.runtime.clock import FakeClock
from pyccm.workers.runtime.replica import Replica
from pyccm.workers.service import events
from pyccm.workers.service.decision import Claim, spec_print
from pyccm.workers.service.executor import Executor
from pyccm.workers.service.ledger import Entry, Ledger, Synced
from pyccm.workers.service.plan import (
    CatchUp,
    CleanedUp,
    CountResync,
    DeleteLoadBalancer,
    EnsureLoadBalancer,
    Idle,
    Land,
    Op,
    OwnerWaitOver,
    Plan,
    Record,
    Tell,
    WaitForOwner,
    make_plan,
)
from pyccm.workers.service.policy import FINALIZER, backend_id
from pyccm.workers.service.sweep import Backends, Members, NodeSweep
from pyccm_sim.fake_provider import FakeCloud
from tests.support.nodes import DELETED_AT
from tests.support.services import make_node, make_service

KEY = "default/web"
CLAIM = Claim()
NOTHING = Entry(last=None, resync_due=False, cleaned_uid=None)


def members(count: int = 2) -> Members:
    nodes = tuple(make_node(f"n{i}") for i in range(1, count + 1))
    ids = frozenset(i for n in nodes if (i := backend_id(n)) is not None)
    return Members(sweeps=3, backends=Backends(nodes=nodes, ids=ids, version=1), picked=ids)


def kinds(stage: tuple[Op, ...]) -> list[str]:
    return [type(op).__name__ for op in stage]


def told(stage: tuple[Op, ...]) -> list[str]:
    """What each `Tell` queues: event reasons, `finalizer+` / `finalizer-` for patches."""
    said: list[str] = []
    for op in stage:
        if isinstance(op, Tell):
            said += [_name(a) for a in op.actions]
    return said


def _name(action: Action) -> str:
    if isinstance(action, RecordEvent):
        return action.reason
    assert isinstance(action, PatchServiceStatus)
    return "finalizer+" if action.add_finalizers else "finalizer-"


def with_finalizer(service: Service, *, deleting: bool = False) -> Service:
    meta = msgspec.structs.replace(
        service.metadata,
        finalizers=(FINALIZER,),
        deletion_timestamp=DELETED_AT if deleting else None,
    )
    return msgspec.structs.replace(service, metadata=meta)


def synced(service: Service, backends: Members) -> Synced:
    spec = spec_print(service, classes=CLAIM.classes)
    ingress = service.status.load_balancer.ingress
    return Synced(service=service, spec=spec, backends=backends.picked, ingress=ingress)


def test_a_new_service_lands_its_finalizer_before_the_ensure_and_records_after() -> None:
    backends = members()
    plan = make_plan(KEY, make_service(), NOTHING, backends, claim=CLAIM)
    (own, catch_up) = plan.stages
    assert kinds(own) == [
        "Tell",
        "Land",
        "ActingOn",
        "EnsureLoadBalancer",
        "Tell",
        "Land",
        "RecordEnsured",
    ]
    assert told(own) == ["EnsuringLoadBalancer", "finalizer+", "EnsuredLoadBalancer"]
    ensure = own[3]
    assert isinstance(ensure, EnsureLoadBalancer)
    assert ensure.nodes == backends.backends.nodes
    assert catch_up == (CatchUp(backends=backends.backends, sweeps=3),)


def test_without_backends_the_warning_goes_with_the_ensures_writes() -> None:
    plan = make_plan(KEY, make_service(), NOTHING, members(0), claim=CLAIM)
    own = plan.stages[0]
    assert kinds(own)[:4] == ["Tell", "Land", "Tell", "ActingOn"]
    assert told(own) == [
        "EnsuringLoadBalancer",
        "finalizer+",
        "UnAvailableLoadBalancer",
        "EnsuredLoadBalancer",
    ]


def test_a_drift_resync_verifies_without_events_and_counts() -> None:
    backends = members()
    service = with_finalizer(make_service())
    entry = Entry(last=synced(service, backends), resync_due=True, cleaned_uid=None)
    (own, _) = make_plan(KEY, service, entry, backends, claim=CLAIM).stages
    assert kinds(own) == ["ActingOn", "EnsureLoadBalancer", "CountResync", "Land", "RecordEnsured"]


def test_moved_members_update_then_tell_then_record() -> None:
    service = with_finalizer(make_service())
    before = members(1)
    entry = Entry(last=synced(service, before), resync_due=False, cleaned_uid=None)
    now = members(2)
    (own, catch_up) = make_plan(KEY, service, entry, now, claim=CLAIM).stages
    assert kinds(own) == ["UpdateLoadBalancer", "Tell", "Land", "Record"]
    assert told(own) == ["UpdatedLoadBalancer"]
    record = own[3]
    assert isinstance(record, Record)
    assert record.synced.backends is now.picked
    assert kinds(catch_up) == ["CatchUp"]


def test_a_deleted_service_loses_its_load_balancer_then_its_finalizer() -> None:
    service = with_finalizer(make_service(), deleting=True)
    (own,) = make_plan(KEY, service, NOTHING, members(), claim=CLAIM).stages
    assert kinds(own) == ["OwnerWaitOver", "DeleteLoadBalancer", "Tell", "Land", "CleanedUp"]
    assert told(own) == ["finalizer-", "DeletedLoadBalancer"]
    assert own[-1] == CleanedUp("uid-web")


def test_another_class_s_deleted_service_waits_for_its_owner_first() -> None:
    service = with_finalizer(make_service(lb_class="example.com/other"), deleting=True)
    (own,) = make_plan(KEY, service, NOTHING, members(), claim=CLAIM).stages
    assert isinstance(own[0], WaitForOwner)
    assert isinstance(own[1], OwnerWaitOver)


def test_a_recreated_service_s_old_load_balancer_goes_in_a_stage_of_its_own() -> None:
    backends = members()
    old = with_finalizer(make_service())
    entry = Entry(last=synced(old, backends), resync_due=False, cleaned_uid=None)
    new = make_service(uid="uid-second")
    (replaced, own, _) = make_plan(KEY, new, entry, backends, claim=CLAIM).stages
    assert kinds(replaced) == ["DeleteLoadBalancer", "Tell", "Land"]
    delete = replaced[0]
    assert isinstance(delete, DeleteLoadBalancer)
    assert delete.service is old
    assert kinds(own)[:3] == ["Forget", "Tell", "Land"]


def test_a_vanished_service_is_deleted_then_forgotten() -> None:
    backends = members()
    entry = Entry(last=synced(make_service(), backends), resync_due=False, cleaned_uid=None)
    stages = make_plan(KEY, None, entry, None, claim=CLAIM).stages
    assert [kinds(s) for s in stages] == [
        ["OwnerWaitOver"],
        ["DeleteLoadBalancer", "Tell", "Land"],
        ["Forget", "Idle"],
    ]


def test_another_shard_s_key_is_idle() -> None:
    from pyccm.workers.service.policy import Shard

    claim = Claim(shard=Shard(1, 2))
    key = next(k for k in (f"default/s{i}" for i in range(20)) if not claim.shard.owns(k))
    plan = make_plan(key, make_service(), NOTHING, members(), claim=claim)
    assert plan.stages == ((Idle("another shard's key"),),)


# --- the executor ---------------------------------------------------------------------------


def test_a_write_whose_service_is_gone_ends_its_stage_not_the_plan() -> None:
    cloud = FakeCloud()
    lbs = cloud.load_balancers()
    assert lbs is not None
    ledger = Ledger()
    commits: list[tuple[Action, ...]] = []

    def gone(key: str, actions: tuple[Action, ...]) -> Ack:
        commits.append(actions)
        failure = ActionFailure(index=0, kind=FailureKind.NOT_FOUND, message="gone")
        return Ack(session=SessionId("t"), id=ResultId(0), failures=(failure,))

    clock = FakeClock()
    sweep = NodeSweep(replica=Replica(), ledger=ledger, clock=clock, owned=list, load_balancers=lbs)
    executor = Executor(
        load_balancers=lbs,
        ledger=ledger,
        nodes=sweep,
        commit=gone,
        classes=CLAIM.classes,
        clock=clock,
    )
    service = make_service()
    event = events.event(service, "X", "x")
    plan = Plan(
        key=KEY,
        stages=(
            (Tell((event,)), Land(), Record(synced(service, members()))),
            (CountResync(),),
        ),
    )
    resyncs = REGISTRY.get_sample_value("pyccm_service_lb_resyncs_total") or 0.0
    executor.run(plan)
    assert commits == [(event,)]
    # The Record after the write that did not land is dropped; the next stage runs.
    assert ledger.entry(KEY).last is None
    assert REGISTRY.get_sample_value("pyccm_service_lb_resyncs_total") == resyncs + 1
    assert cloud.calls == []
