"""A pool's members are read back a page at a time and compared as each page lands: an
unchanged pool costs every page, a pool whose first page holds a member no longer wanted
costs that page alone (Octavia pages at 1,000 members; the simulator here at 2)."""

from __future__ import annotations

from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import MakeLbs, converge, ensure, nodes, reads, service, with_annotations
from tests.support.lb import writes as cloud_writes

ONE_PORT = ((80, 30080, "TCP"),)
MEMBERS = "lbaas/pools/{id}/members"


def test_an_unchanged_pool_is_read_whole_and_a_changed_one_up_to_its_first_unwanted_member(
    sim: OpenStackSimHandle, make_lbs: MakeLbs
) -> None:
    svc = service(ports=ONE_PORT)
    svc = with_annotations(svc, ensure(make_lbs(), svc, nodes(6)).annotations_to_set)
    sim.set_knobs(octavia_page_limit=2)

    # A fresh provider (a restarted worker) has verified nothing: the 6 members in 3 full
    # pages, and the empty one the last full page's `next` link leads to, as Octavia's does.
    lbs = make_lbs()
    mark = sim.mark()
    converge(lambda: lbs.ensure(service=svc, nodes=nodes(6)))
    assert reads(sim, mark).count(MEMBERS) == 4
    assert cloud_writes(sim, mark) == []

    # Six other nodes, the same count: the first page already holds a member not wanted.
    mark = sim.mark()
    converge(lambda: make_lbs().update(service=svc, nodes=nodes(6, start=6)))
    assert reads(sim, mark).count(MEMBERS) == 1
    assert cloud_writes(sim, mark) == [("PUT", MEMBERS)]
    assert sorted(m["name"] for m in sim.resources("member")) == sorted(
        n.name for n in nodes(6, start=6)
    )
