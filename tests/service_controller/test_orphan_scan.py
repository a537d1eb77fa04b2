"""`--orphan-scan-period` (kubernetes/cloud-provider-openstack#3145): off by default; when on, one
shard lists what the cluster owns and warns about each resource no live Service accounts for: a
Warning event on the kube-system namespace and `pyccm_orphaned_resources{kind}`."""

from __future__ import annotations

from prometheus_client import REGISTRY

from pyccm.protocol.messages import RecordEvent
from pyccm.workers.service.controller import ServiceSettings
from pyccm.workers.service.orphans import ORPHANS
from pyccm.workers.service.policy import Shard
from tests.support.services import harness, make_service


def orphaned(kind: str) -> float | None:
    return REGISTRY.get_sample_value("pyccm_orphaned_resources", {"kind": kind})


def test_the_scan_is_off_by_default_and_on_one_shard_only() -> None:
    assert [p.name for p in harness().controller.periodics(lambda key: None)] == ["lb-resync"]
    on = ServiceSettings(orphan_scan_period=60.0)
    assert "orphan-scan" in [p.name for p in harness(on).controller.periodics(lambda key: None)]
    second = ServiceSettings(orphan_scan_period=60.0, shard=Shard(1, 2))
    assert "orphan-scan" not in [
        p.name for p in harness(second).controller.periodics(lambda key: None)
    ]


def test_an_orphan_gets_a_warning_on_kube_system_and_a_metric() -> None:
    h = harness(ServiceSettings(orphan_scan_period=60.0))
    h.put(make_service("web"))
    h.controller.sync("default/web")
    # A load balancer left behind by a Service that no longer exists.
    lbs = h.cloud.load_balancers()
    assert lbs is not None
    lbs.ensure(service=make_service("ghost"), nodes=[])

    (scan,) = [p for p in h.controller.periodics(h.enqueued.append) if p.name == "orphan-scan"]
    h.enqueued.clear()
    scan.run()
    assert h.enqueued == [ORPHANS]
    actions = h.controller.sync(ORPHANS)

    (event,) = actions
    assert isinstance(event, RecordEvent)
    assert (event.type, event.reason) == ("Warning", "OrphanedCloudResource")
    assert (event.regarding.kind, event.regarding.name) == ("Namespace", "kube-system")
    assert "default/ghost" in event.message
    assert orphaned("load balancer") == 1.0
    assert orphaned("floating IP") == 0.0
