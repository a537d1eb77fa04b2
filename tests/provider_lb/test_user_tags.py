"""A user's tags on the load balancer, its listeners and its pools (`load-balancer-tags`,
`listener-tags`, `pool-tags`, as upstream's next release reads them): comma-separated,
added beside pyccm's own tags and never instead of them; only ever added, as upstream
merges them. A tag that looks like one of pyccm's ownership tags refuses its annotation
with a Warning, and none of that annotation's tags are written."""

from __future__ import annotations

from pyccm.provider.interface import LoadBalancers, ProviderEvent
from pyccm.provider.openstack.loadbalancer import service_annotations as a
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import MakeLbs, delete, ensure, nodes, one, service, with_annotations, writes

NAME = "kube_service_kubernetes_default_web"


def warnings(events: tuple[ProviderEvent, ...]) -> list[str]:
    return [e.message for e in events if e.type == "Warning"]


def test_the_three_annotations_tag_the_load_balancer_its_listeners_and_its_pools(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    lbs = make_lbs(cluster_id="c-1")
    svc = service(
        annotations={
            a.LOAD_BALANCER_TAGS: "env=prod, team=network",
            # Upstream splits at commas and white space, and drops empty parts.
            a.LISTENER_TAGS: " front ,,edge  tier=1,",
            a.POOL_TAGS: "backend",
        }
    )

    outcome = ensure(lbs, svc, nodes(2))

    assert warnings(outcome.events) == []
    lb = one(sim, "loadbalancer")
    assert sorted(lb["tags"]) == sorted([NAME, "pyccm-cluster:c-1", "env=prod", "team=network"])
    listeners = sim.resources("listener")
    assert len(listeners) == 2
    for listener in listeners:
        assert sorted(listener["tags"]) == sorted([NAME, "front", "edge", "tier=1"])
    assert [sorted(p["tags"]) for p in sim.resources("pool")] == [["backend"], ["backend"]]


def test_tags_added_to_an_annotation_are_added_and_removed_ones_stay(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(ports=((80, 30080, "TCP"),), annotations={a.POOL_TAGS: "one"})
    svc = with_annotations(svc, ensure(lbs, svc, nodes(2)).annotations_to_set)
    assert one(sim, "pool")["tags"] == ["one"]
    assert one(sim, "listener")["tags"] == [NAME]

    more = {a.POOL_TAGS: "two", a.LISTENER_TAGS: "l1", a.LOAD_BALANCER_TAGS: "lb1"}
    mark = sim.mark()
    ensure(lbs, with_annotations(svc, more), nodes(2))

    # Upstream's merge: "one" left the annotation and stays on the pool.
    assert sorted(one(sim, "pool")["tags"]) == ["one", "two"]
    assert sorted(one(sim, "listener")["tags"]) == sorted([NAME, "l1"])
    assert sorted(one(sim, "loadbalancer")["tags"]) == sorted([NAME, "lb1"])
    assert sorted(writes(sim, mark)) == [
        ("PUT", "lbaas/listeners/{id}"),
        ("PUT", "lbaas/loadbalancers/{id}"),
        ("PUT", "lbaas/pools/{id}"),
    ]
    # Nothing left to add: an ensure writes nothing.
    mark = sim.mark()
    ensure(lbs, with_annotations(svc, more), nodes(2))
    assert writes(sim, mark) == []


def test_a_tag_that_looks_like_an_ownership_tag_refuses_its_annotation(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    lbs = make_lbs(cluster_id="c-1")
    svc = service(
        ports=((80, 30080, "TCP"),),
        annotations={
            # Would make the load balancer look shared with another Service (never deleted)
            # or owned by another cluster.
            a.LOAD_BALANCER_TAGS: "env=prod,pyccm-cluster:c-2",
            a.LISTENER_TAGS: "kube_service_kubernetes_default_other, ok",
            a.POOL_TAGS: "x" * 256,
        },
    )

    outcome = ensure(lbs, svc, nodes(1))

    assert sorted(one(sim, "loadbalancer")["tags"]) == sorted([NAME, "pyccm-cluster:c-1"])
    assert one(sim, "listener")["tags"] == [NAME]
    assert one(sim, "pool")["tags"] == []
    found = warnings(outcome.events)
    assert len(found) == 3
    assert f"annotation {a.LOAD_BALANCER_TAGS}=" in found[0]
    assert "'pyccm-cluster:c-2'" in found[0]
    assert f"annotation {a.LISTENER_TAGS}=" in found[1]
    assert "ownership tags" in found[1]
    assert f"annotation {a.POOL_TAGS}=" in found[2]
    assert "256 characters" in found[2]
    assert {e.reason for e in outcome.events} == {a.INVALID_ANNOTATION}


def test_a_spoofing_tag_added_later_writes_nothing_and_the_load_balancer_stays_deletable(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(ports=((80, 30080, "TCP"),))
    svc = with_annotations(svc, ensure(lbs, svc, nodes(1)).annotations_to_set)

    mark = sim.mark()
    spoofed = with_annotations(svc, {a.LOAD_BALANCER_TAGS: "kube_service_kubernetes_x_y"})
    outcome = ensure(lbs, spoofed, nodes(1))

    assert writes(sim, mark) == []
    assert a.LOAD_BALANCER_TAGS in warnings(outcome.events)[0]
    delete(lbs, spoofed)
    assert sim.inventory()["loadbalancer"] == 0


def test_below_octavia_2_5_the_tags_are_ignored_with_a_warning(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    sim.set_knobs(octavia_version="2.4")
    svc = service(ports=((80, 30080, "TCP"),), annotations={a.POOL_TAGS: "backend"})

    outcome = ensure(lbs, svc, nodes(1))

    assert one(sim, "pool")["tags"] == []
    (event,) = [e for e in outcome.events if e.reason == "LoadBalancerTagsIgnored"]
    assert a.POOL_TAGS in event.message
    assert "needs Octavia API 2.5" in event.message


def test_a_guest_of_a_shared_load_balancer_tags_its_own_listeners_not_the_load_balancer(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    owner = service("owner", ports=((80, 30080, "TCP"),))
    shared_id = ensure(lbs, owner, nodes(1)).annotations_to_set[a.LOAD_BALANCER_ID]
    guest = service(
        "guest",
        ports=((81, 30081, "TCP"),),
        annotations={
            a.LOAD_BALANCER_ID: shared_id,
            a.LOAD_BALANCER_TAGS: "guest-wants-this",
            a.LISTENER_TAGS: "guest-listener",
        },
    )

    outcome = ensure(lbs, guest, nodes(1))

    assert "guest-wants-this" not in one(sim, "loadbalancer")["tags"]
    tags = {li["protocol_port"]: li["tags"] for li in sim.resources("listener")}
    assert "guest-listener" in tags[81]
    assert "guest-listener" not in tags[80]
    assert any(a.LOAD_BALANCER_TAGS in m and "shared" in m for m in warnings(outcome.events))
