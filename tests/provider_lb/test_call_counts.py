"""The cloud-call budget of the four operations docs/upstream.md#call-sequences compares with
upstream: no more calls than upstream with an instantly ACTIVE Octavia, and far fewer on a
real one, where upstream polls after every write. `call_counts.py` prints the table."""

from __future__ import annotations

from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.provider_lb.call_counts import UPSTREAM, Count, run


def test_each_operation_stays_within_upstreams_call_budget(sim: OpenStackSimHandle) -> None:
    counts = run(sim)

    assert counts == {
        # GET ?name, GET ?name=legacy, POST lb; GET ?name, GET fips?description, POST fip
        # (the just-created VIP port holds no floating IP: no GET fips?port_id).
        "create a 2-port Service": Count(reads=4, writes=2, syncs=2),
        "re-ensure, nothing changed": Count(reads=6, writes=0, syncs=1),
        # GET lb (its updated_at unchanged since its children were verified), GET fips.
        "re-ensure, nothing changed since it was verified": Count(reads=2, writes=0, syncs=1),
        # One write per sync: the second pool's PUT comes in the next sync, which does not
        # read back the members of the first (this process just wrote them).
        "update: 10 nodes added": Count(reads=6, writes=2, syncs=2),
        "delete": Count(reads=4, writes=2, syncs=2),
    }
    for name, count in counts.items():
        reads, writes = UPSTREAM[name]
        assert count.reads + count.writes <= reads + writes
