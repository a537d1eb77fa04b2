"""The cloud-call budget of the four operations the reference compares with upstream
(§3.14): no more calls than upstream with an instantly ACTIVE Octavia, and far fewer on a
real one, where upstream polls after every write. `call_counts.py` prints the table."""

from __future__ import annotations

from sim.openstack.testing import OpenStackSimHandle
from tests.provider_lb.call_counts import UPSTREAM, Count, run


def test_each_operation_stays_within_upstreams_call_budget(sim: OpenStackSimHandle) -> None:
    counts = run(sim)

    assert counts == {
        "create a 2-port Service": Count(reads=5, writes=2, syncs=2),
        "re-ensure, nothing changed": Count(reads=6, writes=0, syncs=1),
        "update: 10 nodes added": Count(reads=3, writes=2, syncs=1),
        "delete": Count(reads=4, writes=2, syncs=2),
    }
    for name, count in counts.items():
        reads, writes = UPSTREAM[name]
        assert count.reads + count.writes <= reads + writes
