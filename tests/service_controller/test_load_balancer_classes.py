"""`--load-balancer-class NAME` (kubernetes/cloud-provider-openstack#2598): pyccm claims the
Services of that class as well as those without one (`--load-balancer-class-only`: only that class),
and never touches a Service of any other class: no cloud call, no status, no finalizer. The
manager's service view (and a standalone worker's) leaves such Services out; the controller checks
again, so a worker given a wider view than its own claim still ignores them."""

from __future__ import annotations

import subprocess
import sys

import msgspec
import pytest

from pyccm.flags.load_balancer_class import LoadBalancerClasses
from pyccm.protocol.messages import PatchServiceStatus, Topic
from pyccm.protocol.projections import VIEWS, project, views
from pyccm.protocol.views import LoadBalancerIngress, LoadBalancerStatus, Service, ServiceStatus
from pyccm.provider.errors import RetryAfter
from pyccm.workers.service.controller import ServiceSettings
from pyccm.workers.service.decision import FOREIGN_GRACE
from pyccm.workers.service.policy import FINALIZER
from tests.support.services import Harness, harness, make_service

OURS = "example.com/ours"
THEIRS = "example.com/theirs"


def claiming(name: str, *, only: bool = False) -> Harness:
    return harness(ServiceSettings(classes=LoadBalancerClasses(name=name, only=only)))


def service_of(lb_class: str | None, name: str = "web") -> Service:
    return make_service(name, lb_class=lb_class)


@pytest.mark.parametrize(
    ("claim", "lb_class", "kept"),
    [
        (LoadBalancerClasses(), None, True),
        (LoadBalancerClasses(), OURS, False),
        (LoadBalancerClasses(name=OURS), None, True),
        (LoadBalancerClasses(name=OURS), OURS, True),
        (LoadBalancerClasses(name=OURS), THEIRS, False),
        (LoadBalancerClasses(name=OURS, only=True), None, False),
        (LoadBalancerClasses(name=OURS, only=True), OURS, True),
        (LoadBalancerClasses(name=OURS, only=True), THEIRS, False),
    ],
)
def test_the_service_view_carries_only_the_claimed_classes(
    claim: LoadBalancerClasses, lb_class: str | None, kept: bool
) -> None:
    projected = project(views(claim)["service"], Topic.SERVICE, service_of(lb_class))
    assert (projected is not None) == kept


def test_the_default_view_is_upstreams_and_keeps_a_service_holding_our_finalizer() -> None:
    theirs = service_of(THEIRS)
    assert project(VIEWS["service"], Topic.SERVICE, theirs) is None
    meta = msgspec.structs.replace(theirs.metadata, finalizers=(FINALIZER,))
    held = msgspec.structs.replace(theirs, metadata=meta)
    assert project(VIEWS["service"], Topic.SERVICE, held) is not None


@pytest.mark.parametrize("only", [False, True])
def test_a_tree_claiming_a_class_converges_it_and_ignores_the_others(only: bool) -> None:
    h = claiming(OURS, only=only)
    for name, lb_class in (("ours", OURS), ("theirs", THEIRS), ("plain", None)):
        service = service_of(lb_class, name)
        h.put(service)
        for key in h.controller.keys_for(Topic.SERVICE, service.key, None, service):
            h.controller.sync(str(key))
        # A sync asked for anyway (a wider view than the claim) does nothing either.
        h.controller.sync(service.key)

    assert h.cloud.load_balancer("default/ours") is not None
    assert h.cloud.load_balancer("default/theirs") is None
    assert (h.cloud.load_balancer("default/plain") is None) == only
    touched = {c.subject for c in h.cloud.calls}
    assert touched == ({"default/ours"} if only else {"default/ours", "default/plain"})
    patches = [a for a in h.actions(PatchServiceStatus) if isinstance(a, PatchServiceStatus)]
    written = {f"{patch.namespace}/{patch.name}" for patch in patches}
    assert written == touched


def with_finalizer_and_status(service: Service) -> Service:
    meta = msgspec.structs.replace(service.metadata, finalizers=(FINALIZER,))
    ingress = (LoadBalancerIngress(ip="192.0.2.7"),)
    status = ServiceStatus(load_balancer=LoadBalancerStatus(ingress=ingress))
    return msgspec.structs.replace(service, metadata=meta, status=status)


def test_a_foreign_service_holding_our_finalizer_is_left_alone_until_deleted() -> None:
    # Only possible through LoadBalancer -> ClusterIP -> LoadBalancer of another class
    # before our cleanup ran (the class is immutable otherwise), seen by a fresh worker.
    h = claiming(OURS)
    lbs = h.cloud.load_balancers()
    assert lbs is not None
    lbs.ensure(service=service_of(None), nodes=())  # the one our earlier worker made
    h.cloud.calls.clear()
    held = with_finalizer_and_status(service_of(THEIRS))
    h.put(held)
    assert h.enqueued == []
    h.controller.sync("default/web")
    assert h.cloud.calls == []
    assert h.commits == []

    meta = msgspec.structs.replace(held.metadata, deletion_timestamp="2026-11-24T00:00:00Z")
    h.put(msgspec.structs.replace(held, metadata=meta))
    assert h.enqueued == ["default/web"]
    # The finalizer has our name but is most likely its owner's: the owner goes first.
    with pytest.raises(RetryAfter) as waited:
        h.controller.sync("default/web")
    assert waited.value.delay == FOREIGN_GRACE
    assert h.cloud.calls == []
    assert h.commits == []
    h.clock.advance(FOREIGN_GRACE / 2)
    with pytest.raises(RetryAfter) as waited:
        h.controller.sync("default/web")
    assert waited.value.delay == FOREIGN_GRACE / 2
    assert h.cloud.calls == []

    h.clock.advance(FOREIGN_GRACE / 2)  # nobody removed it: ours to clean up after all
    h.controller.sync("default/web")

    assert h.cloud_calls() == ["lb_get", "lb_ensure_deleted"]
    assert h.cloud.load_balancer("default/web") is None
    (patch,) = h.actions(PatchServiceStatus)
    assert isinstance(patch, PatchServiceStatus)
    # Our finalizer goes; the other controller's status is not written.
    assert (patch.remove_finalizers, patch.ingress) == ((FINALIZER,), None)


def test_a_foreign_service_whose_owner_removes_the_finalizer_in_the_grace_is_never_looked_up() -> (
    None
):
    h = claiming(OURS)
    held = with_finalizer_and_status(service_of(THEIRS))
    meta = msgspec.structs.replace(held.metadata, deletion_timestamp="2026-11-24T00:00:00Z")
    h.put(msgspec.structs.replace(held, metadata=meta))
    with pytest.raises(RetryAfter):
        h.controller.sync("default/web")
    h.replica.apply(Topic.SERVICE, "default/web", None)  # the owner's cleanup landed
    h.clock.advance(FOREIGN_GRACE)
    h.controller.sync("default/web")
    assert h.cloud.calls == []
    assert h.commits == []


def test_a_service_this_worker_served_that_turns_up_in_another_class_loses_our_lb() -> None:
    # The type change and the new class arrived as one update (the key was queued).
    h = claiming("")
    h.put(service_of(None))
    h.controller.sync("default/web")
    served = h.replica.service("default/web")
    assert served is not None
    assert served.status.load_balancer.ingress
    h.commits.clear()
    h.cloud.calls.clear()

    spec = msgspec.structs.replace(served.spec, load_balancer_class=THEIRS)
    h.put(msgspec.structs.replace(served, spec=spec))
    assert h.enqueued[-1] == "default/web"
    h.controller.sync("default/web")

    assert h.cloud.load_balancer("default/web") is None
    (patch,) = h.actions(PatchServiceStatus)
    assert isinstance(patch, PatchServiceStatus)
    assert (patch.remove_finalizers, patch.ingress) == ((FINALIZER,), None)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--load-balancer-class-only"], "--load-balancer-class-only needs --load-balancer-class"),
        (["--load-balancer-class", "no spaces"], "is not a qualified name"),
    ],
)
@pytest.mark.parametrize("command", [["manager"], ["worker", "service", "--standalone"]])
def test_a_bad_class_flag_is_one_line_and_exit_code_2(
    command: list[str], flags: list[str], message: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pyccm", *command, *flags, "--cloud-provider=fake"]
        if command[0] == "worker"
        else [sys.executable, "-m", "pyccm", *command, *flags, "--secure-port=0"],
        capture_output=True,
        check=False,
        text=True,
        timeout=60,
    )
    output = done.stdout + done.stderr  # the worker says it on stderr
    assert done.returncode == 2, output
    assert message in output
    assert len(output.strip().splitlines()) == 1
