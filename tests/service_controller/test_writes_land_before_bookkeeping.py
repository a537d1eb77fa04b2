"""A Service sync commits its writes itself and returns nothing (controller.py says why):
what it records or forgets afterwards must not happen unless the writes landed, and the
runtime does not tell a controller whether returned actions did. These pin the cases
where returning the actions instead would lose them."""

from __future__ import annotations

import pytest

from pyccm.protocol.messages import FailureKind, PatchServiceStatus, RecordEvent, Topic
from pyccm.workers.runtime.controller import SyncFailed
from pyccm.workers.service.policy import FINALIZER
from tests.support.services import Harness, make_service

KEY = "default/web"


def served(h: Harness) -> None:
    h.put(make_service())
    assert h.controller.sync(KEY) == ()
    h.commits.clear()
    h.cloud.calls.clear()


def test_a_vanished_services_deletion_is_told_again_when_its_write_did_not_land(
    h: Harness,
) -> None:
    served(h)
    h.replica.apply(Topic.SERVICE, KEY, None)  # deleted without our finalizer
    h.fail_next.append(FailureKind.CONFLICT)

    with pytest.raises(SyncFailed):
        h.controller.sync(KEY)
    assert h.cloud.load_balancer(KEY) is None
    # The retry still knows the Service: it looks again and tells again.
    assert h.controller.sync(KEY) == ()

    assert h.cloud_calls() == ["lb_get", "lb_ensure_deleted", "lb_get"]
    assert h.events() == ["DeletingLoadBalancer", "DeletedLoadBalancer", "DeletedLoadBalancer"]
    # Told, and forgotten: a third sync has nothing to do.
    h.controller.sync(KEY)
    assert len(h.commits) == 2


def test_a_recreated_services_old_load_balancer_is_told_before_the_new_finalizer(
    h: Harness,
) -> None:
    served(h)
    h.put(make_service(uid="uid-second"))

    assert h.controller.sync(KEY) == ()

    first, second, *_ = h.commits
    assert [a.reason for a in first.actions if isinstance(a, RecordEvent)] == [
        "DeletingLoadBalancer",
        "DeletedLoadBalancer",
    ]
    assert {a.regarding.uid for a in first.actions if isinstance(a, RecordEvent)} == {"uid-web"}
    # The new Service's finalizer lands after the old load balancer went, before the new
    # one's first cloud call.
    (finalizer,) = [a for a in second.actions if isinstance(a, PatchServiceStatus)]
    assert finalizer.add_finalizers == (FINALIZER,)
    assert finalizer.uid == "uid-second"
    assert second.cloud_calls_before == first.cloud_calls_before == 2
