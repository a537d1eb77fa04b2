"""service sync decisions against the fake cloud (docs/upstream.md#service-controller,
and where pyccm differs)."""

from __future__ import annotations

import msgspec
import pytest

from pyccm.protocol.messages import FailureKind, PatchServiceAnnotations, PatchServiceStatus, Topic
from pyccm.protocol.views import Taint
from pyccm.provider.errors import CloudError, ImplementedElsewhere, RetryAfter
from pyccm.workers.runtime.controller import Later, SyncFailed
from pyccm.workers.service.controller import ServiceSettings
from pyccm.workers.service.policy import FINALIZER, Shard
from pyccm.workers.service.sweep import SWEEP
from pyccm_sim.fake_provider import ANNOTATION_LB_ID, FakeMethod
from tests.support.services import Harness, harness, make_node, make_service

KEY = "default/web"


def ensured(h: Harness) -> None:
    h.put(make_service())
    h.controller.sync(KEY)
    h.commits.clear()
    h.cloud.calls.clear()
    h.enqueued.clear()


def test_the_finalizer_is_committed_before_any_cloud_call(h: Harness) -> None:
    h.put(make_service())
    h.controller.sync(KEY)
    first = h.commits[0]
    assert first.cloud_calls_before == 0
    patch = next(a for a in first.actions if isinstance(a, PatchServiceStatus))
    assert patch.add_finalizers == (FINALIZER,)
    assert h.events()[0] == "EnsuringLoadBalancer"


def test_a_new_service_gets_a_load_balancer_its_ingress_and_annotations(h: Harness) -> None:
    h.put(make_service())
    h.controller.sync(KEY)
    lb = h.cloud.load_balancer(KEY)
    assert lb is not None
    assert lb.members == ("n1", "n2")
    service = h.replica.service(KEY)
    assert service is not None
    assert service.status.load_balancer.ingress[0].ip == lb.address
    assert service.metadata.annotations[ANNOTATION_LB_ID] == lb.lb_id
    assert h.events() == ["EnsuringLoadBalancer", "EnsuredLoadBalancer"]


def test_the_echo_of_our_own_writes_costs_no_cloud_call(h: Harness) -> None:
    ensured(h)
    assert h.controller.keys_for(Topic.SERVICE, KEY, None, h.replica.service(KEY)) == (KEY,)
    h.controller.sync(KEY)
    assert h.cloud.calls == []
    assert h.commits == []


def test_a_restarted_worker_verifies_converged_services_after_those_that_need_work(
    h: Harness,
) -> None:
    ensured(h)
    done = h.replica.service(KEY)
    restarted = harness()  # a new process: it has synced nothing yet
    keys = restarted.controller.keys_for(Topic.SERVICE, KEY, None, done)
    assert keys == (KEY,)
    assert type(keys[0]) is Later
    new = make_service(name="fresh")
    fresh = restarted.controller.keys_for(Topic.SERVICE, "default/fresh", None, new)
    assert fresh == ("default/fresh",)
    assert type(fresh[0]) is str


def test_a_restarted_worker_verifies_a_converged_service_without_events(h: Harness) -> None:
    ensured(h)
    done = h.replica.service(KEY)
    assert done is not None
    restarted = harness(load_balancers=h.cloud.load_balancers())
    restarted.put(done)
    restarted.controller.sync(KEY)
    # The cloud was asked (a verification), the API got no Event.
    assert h.cloud_calls() == ["lb_ensure"]
    assert restarted.events() == []


def test_a_restarted_worker_announces_a_service_it_must_still_converge(h: Harness) -> None:
    restarted = harness(load_balancers=h.cloud.load_balancers())
    restarted.put(make_service())
    restarted.controller.sync(KEY)
    assert restarted.events() == ["EnsuringLoadBalancer", "EnsuredLoadBalancer"]


def test_a_port_change_runs_ensure_again(h: Harness) -> None:
    ensured(h)
    service = h.replica.service(KEY)
    assert service is not None
    spec = msgspec.structs.replace(
        service.spec, ports=(*service.spec.ports, *make_service(ports=(443,)).spec.ports)
    )
    h.put(msgspec.structs.replace(service, spec=spec))
    h.controller.sync(KEY)
    lb = h.cloud.load_balancer(KEY)
    assert lb is not None
    assert lb.ports == (80, 443)
    assert h.cloud_calls() == ["lb_ensure"]


def test_a_new_node_updates_the_members_only(h: Harness) -> None:
    ensured(h)
    h.put(make_node("n3"))
    assert h.enqueued == [SWEEP]
    assert h.sweep() == [KEY]
    h.controller.sync(KEY)
    lb = h.cloud.load_balancer(KEY)
    assert lb is not None
    assert lb.members == ("n1", "n2", "n3")
    assert h.cloud_calls() == ["lb_update"]
    assert h.events() == ["UpdatedLoadBalancer"]


def test_a_node_heartbeat_or_readiness_change_enqueues_nothing(h: Harness) -> None:
    ensured(h)
    old, new = make_node("n1"), make_node("n1", version="2")
    assert h.controller.keys_for(Topic.NODE, "n1", old, new) == ()


@pytest.mark.parametrize(
    "change",
    [
        {"labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "true"}},
        {"labels": {"node.kubernetes.io/exclude-from-external-load-balancers": ""}},
        {"labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "maybe"}},
        {"taints": (Taint(key="ToBeDeletedByClusterAutoscaler", effect="NoSchedule"),)},
        {"deleting": True},
    ],
)
def test_excluded_autoscaled_away_and_deleting_nodes_leave_the_backends(
    h: Harness, change: dict[str, object]
) -> None:
    ensured(h)
    h.put(make_node("n2", version="2", **change))  # type: ignore[arg-type]
    assert h.enqueued == [SWEEP]
    h.controller.sync(KEY)
    lb = h.cloud.load_balancer(KEY)
    assert lb is not None
    assert lb.members == ("n1",)


def test_an_exclusion_label_of_false_keeps_the_node(h: Harness) -> None:
    ensured(h)
    label = {"node.kubernetes.io/exclude-from-external-load-balancers": "false"}
    h.put(make_node("n2", version="2", labels=label))
    # A relabelled node is looked at (a node selector may read the label): nobody's
    # backends changed, so the sweep enqueues nothing and the cloud hears nothing.
    assert h.enqueued == [SWEEP]
    assert h.sweep() == []
    assert h.cloud.calls == []


def test_a_provisioning_load_balancer_is_retried_after_a_delay_not_waited_for(h: Harness) -> None:
    h.cloud.set_lb_provisioning(syncs=2, retry_delay=1.5)
    h.put(make_service())
    for _ in range(2):
        with pytest.raises(RetryAfter) as retry:
            h.controller.sync(KEY)
        assert retry.value.delay == 1.5
    h.controller.sync(KEY)
    service = h.replica.service(KEY)
    assert service is not None
    assert service.status.load_balancer.ingress
    # One finalizer write: the retries saw it in the replica.
    assert len(h.actions(PatchServiceStatus)) == 2


def test_a_deleted_service_loses_its_load_balancer_then_its_finalizer(h: Harness) -> None:
    ensured(h)
    service = h.replica.service(KEY)
    assert service is not None
    meta = msgspec.structs.replace(service.metadata, deletion_timestamp="2026-11-21T00:00:00Z")
    h.put(msgspec.structs.replace(service, metadata=meta))
    h.controller.sync(KEY)
    assert h.cloud.load_balancer(KEY) is None
    assert h.cloud_calls() == ["lb_get", "lb_ensure_deleted"]
    assert h.events() == ["DeletingLoadBalancer", "DeletedLoadBalancer"]
    (patch,) = h.actions(PatchServiceStatus)
    assert isinstance(patch, PatchServiceStatus)
    assert patch.remove_finalizers == (FINALIZER,)
    assert h.replica.service(KEY) is None


def test_a_cleanup_rerun_before_the_finalizer_echo_calls_no_cloud(h: Harness) -> None:
    ensured(h)
    service = h.replica.service(KEY)
    assert service is not None
    meta = msgspec.structs.replace(service.metadata, deletion_timestamp="2026-11-21T00:00:00Z")
    deleting = msgspec.structs.replace(service, metadata=meta)
    h.put(deleting)
    h.controller.sync(KEY)
    h.cloud.calls.clear()
    # The queue re-runs the key (another update came in) before the watch shows the
    # finalizer gone: the replica still holds the Service with it.
    h.put(deleting)
    h.controller.sync(KEY)
    assert h.cloud.calls == []


def test_a_switch_to_cluster_ip_deletes_the_load_balancer_and_clears_the_status(h: Harness) -> None:
    ensured(h)
    old = h.replica.service(KEY)
    assert old is not None
    new = msgspec.structs.replace(old, spec=msgspec.structs.replace(old.spec, type="ClusterIP"))
    h.put(new)
    assert h.controller.keys_for(Topic.SERVICE, KEY, old, new) == (KEY,)
    h.controller.sync(KEY)
    assert h.cloud.load_balancer(KEY) is None
    after = h.replica.service(KEY)
    assert after is not None
    assert after.status.load_balancer.ingress == ()
    assert FINALIZER not in after.metadata.finalizers
    # The finalizer removal's echo is a ClusterIP Service like any other: not enqueued.
    assert h.controller.keys_for(Topic.SERVICE, KEY, new, after) == ()


def test_a_service_deleted_without_the_finalizer_still_loses_its_load_balancer(h: Harness) -> None:
    ensured(h)
    old = h.replica.service(KEY)
    h.replica.apply(Topic.SERVICE, KEY, None)
    assert h.controller.keys_for(Topic.SERVICE, KEY, old, None) == (KEY,)
    h.controller.sync(KEY)
    assert h.cloud.load_balancer(KEY) is None
    assert "DeletedLoadBalancer" in h.events()


def test_a_service_deleted_while_its_first_ensure_is_provisioning_loses_its_load_balancer(
    h: Harness,
) -> None:
    # The first ensure created the LB and is waiting for ACTIVE; a user
    # strips the finalizer and deletes the Service. What this process created must go.
    h.cloud.set_lb_provisioning(syncs=1)
    h.put(make_service())
    with pytest.raises(RetryAfter):
        h.controller.sync(KEY)
    assert h.cloud.load_balancer(KEY) is not None
    h.replica.apply(Topic.SERVICE, KEY, None)
    h.controller.sync(KEY)
    assert h.cloud.load_balancer(KEY) is None


def test_a_service_recreated_with_a_new_uid_gets_a_fresh_load_balancer(h: Harness) -> None:
    ensured(h)
    first = h.cloud.load_balancer(KEY)
    h.put(make_service(uid="uid-second"))
    h.controller.sync(KEY)
    assert h.cloud_calls() == ["lb_get", "lb_ensure_deleted", "lb_ensure"]
    second = h.cloud.load_balancer(KEY)
    assert first is not None
    assert second is not None
    assert second.address != first.address


def test_a_load_balancer_class_is_someone_elses(h: Harness) -> None:
    service = make_service(lb_class="example.com/other")
    h.put(service)
    assert h.controller.keys_for(Topic.SERVICE, KEY, None, service) == ()
    h.controller.sync(KEY)
    assert h.cloud.calls == []


def test_a_cloud_error_is_a_warning_and_the_next_sync_ensures_again(h: Harness) -> None:
    h.cloud.fail_next("lb_ensure", CloudError("octavia is down (HTTP 503)", status=503))
    h.put(make_service())
    with pytest.raises(SyncFailed) as failed:
        h.controller.sync(KEY)
    (event,) = [
        a for a in failed.value.actions if getattr(a, "reason", "") == "SyncLoadBalancerFailed"
    ]
    assert "octavia is down" in getattr(event, "message", "")
    h.controller.sync(KEY)
    assert h.cloud.load_balancer(KEY) is not None


@pytest.mark.parametrize("method", ["lb_ensure", "lb_get"])
def test_an_unexpected_exception_is_a_warning_without_its_text_and_is_retried(
    h: Harness, method: FakeMethod
) -> None:
    # The real Octavia once made keystoneauth raise a TypeError: that must reach the
    # Service as the upstream Warning (never only a log line), for a create and a delete.
    secret = "s3cr3t-in-a-library-message"
    h.cloud.fail_next(method, TypeError(f"string indices must be integers {secret}"))
    if method == "lb_get":
        ensured(h)
        service = h.replica.service(KEY)
        assert service is not None
        meta = msgspec.structs.replace(service.metadata, deletion_timestamp="2026-11-24T00:00:00Z")
        h.put(msgspec.structs.replace(service, metadata=meta))
    else:
        h.put(make_service())
    with pytest.raises(SyncFailed) as failed:
        h.controller.sync(KEY)
    (event,) = [a for a in failed.value.actions if getattr(a, "type", "") == "Warning"]
    assert getattr(event, "reason", "") in {"SyncLoadBalancerFailed", "DeleteLoadBalancerFailed"}
    assert "unexpected TypeError" in getattr(event, "message", "")
    assert secret not in getattr(event, "message", "")
    h.controller.sync(KEY)
    assert (h.cloud.load_balancer(KEY) is None) == (method == "lb_get")


def test_a_failed_member_update_warns_and_falls_back_to_a_full_ensure(h: Harness) -> None:
    ensured(h)
    h.cloud.fail_next("lb_update", CloudError("conflict", status=409))
    h.put(make_node("n3"))
    with pytest.raises(SyncFailed) as failed:
        h.controller.sync(KEY)
    assert [getattr(a, "reason", "") for a in failed.value.actions] == ["UpdateLoadBalancerFailed"]
    h.controller.sync(KEY)
    assert h.cloud_calls() == ["lb_update", "lb_get", "lb_ensure"]
    lb = h.cloud.load_balancer(KEY)
    assert lb is not None
    assert lb.members == ("n1", "n2", "n3")


def test_no_backend_nodes_is_a_warning_but_the_cloud_is_still_called() -> None:
    h = harness(nodes=0)
    h.put(make_service())
    h.controller.sync(KEY)
    assert "UnAvailableLoadBalancer" in h.events()
    assert h.cloud.load_balancer(KEY) is not None


def test_implemented_elsewhere_keeps_the_finalizer_and_writes_no_status(h: Harness) -> None:
    h.cloud.fail_next("lb_ensure", ImplementedElsewhere("another controller"))
    h.put(make_service())
    h.controller.sync(KEY)
    service = h.replica.service(KEY)
    assert service is not None
    assert FINALIZER in service.metadata.finalizers
    assert not service.status.load_balancer.ingress
    assert h.events() == ["EnsuringLoadBalancer"]


def test_a_drift_resync_re_ensures_quietly(h: Harness) -> None:
    ensured(h)
    queued: list[str] = []
    (resync,) = h.controller.periodics(queued.append)
    resync.run()
    assert queued == [KEY]
    h.controller.sync(KEY)
    assert h.cloud_calls() == ["lb_ensure"]
    assert h.commits == []
    # Done for this period: the next sync is free again.
    h.controller.sync(KEY)
    assert h.cloud_calls() == ["lb_ensure"]


def test_a_write_the_manager_could_not_apply_is_retried_not_forgotten(h: Harness) -> None:
    h.put(make_service())
    h.controller.sync(KEY)  # finalizer lands
    h.commits.clear()
    service = h.replica.service(KEY)
    assert service is not None
    unchanged = msgspec.structs.replace(service, status=make_service().status)
    h.put(unchanged)
    h.cloud.calls.clear()
    # Simulate the status write of a fresh ensure failing on a conflict.
    h.put(make_service(ports=(80, 81)))
    h.fail_next.extend([FailureKind.CONFLICT, FailureKind.CONFLICT])
    with pytest.raises(SyncFailed):
        h.controller.sync(KEY)
    with pytest.raises(SyncFailed):
        h.controller.sync(KEY)
    h.controller.sync(KEY)
    final = h.replica.service(KEY)
    assert final is not None
    assert final.status.load_balancer.ingress


def test_each_service_key_belongs_to_exactly_one_shard() -> None:
    shards = [Shard.parse(f"{i}/3") for i in range(3)]
    keys = [f"ns{n}/svc{n}" for n in range(300)]
    owners = [sum(s.owns(k) for s in shards) for k in keys]
    assert owners == [1] * 300
    assert all(sum(s.owns(k) for k in keys) > 50 for s in shards)


@pytest.mark.parametrize("value", ["", "1", "2/2", "a/b", "-1/2", "0/0"])
def test_a_bad_shard_flag_says_why(value: str) -> None:
    with pytest.raises(ValueError, match="--shard"):
        Shard.parse(value)


def test_a_shard_ignores_services_it_does_not_own() -> None:
    h = harness(ServiceSettings(shard=Shard(0, 2)))
    owned = [k for k in (f"default/s{i}" for i in range(20)) if Shard(0, 2).owns(k)]
    other = next(k for k in (f"default/s{i}" for i in range(20)) if k not in owned)
    service = make_service(other.split("/")[1])
    assert h.controller.keys_for(Topic.SERVICE, other, None, service) == ()
    assert h.controller.name == "service-0"


def test_update_events_list_at_most_twenty_node_names() -> None:
    h = harness(nodes=25)
    h.put(make_service())
    h.controller.sync(KEY)
    h.cloud.fail_next("lb_update", CloudError("boom", status=500))
    h.put(
        make_node(
            "n9",
            labels={"node.kubernetes.io/exclude-from-external-load-balancers": "true"},
            version="2",
        )
    )
    with pytest.raises(SyncFailed) as failed:
        h.controller.sync(KEY)
    message = getattr(failed.value.actions[0], "message", "")
    assert "<4 more>" in message
    assert "(total 24)" in message
    assert isinstance(h.actions(PatchServiceAnnotations)[0], PatchServiceAnnotations)


def test_a_burst_of_node_changes_is_one_sweep_key_not_every_service_per_node() -> None:
    h = harness(nodes=0)
    for index in range(50):
        h.put(make_service(f"s{index}"))
        h.controller.sync(f"default/s{index}")
    h.enqueued.clear()
    for index in range(200):
        h.put(make_node(f"n{index}"))
    # One key; without the sweep it would be 200 x 50 Service keys.
    assert h.enqueued == [SWEEP]
    assert len(set(h.sweep())) == 50


def test_the_sweep_leaves_services_never_synced_to_their_own_first_sync() -> None:
    h = harness(nodes=0)
    for index in range(50):
        h.put(make_service(f"s{index}"))
    h.enqueued.clear()
    h.put(make_node("n0"))

    # Their keys are queued already; their first sync computes the node set.
    assert h.sweep() == []
    h.controller.sync("default/s0")
    lb = h.cloud.load_balancer("default/s0")
    assert lb is not None
    assert lb.members == ("n0",)
