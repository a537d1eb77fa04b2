"""Each controller tells the worker process what it needs through its spec
(pyccm/workers/registry.py): its flags, their checks, whether the cloud must know the
cluster id, its name on the bus; the process itself knows no controller by name."""

from __future__ import annotations

import argparse

import pytest

from pyccm.cli import build_parser
from pyccm.protocol.controllers import CONTROLLERS, canonical
from pyccm.provider.errors import ConfigError
from pyccm.workers.registry import SPECS
from pyccm.workers.runtime.commit import Committer
from pyccm.workers.runtime.controller import Disabled
from pyccm.workers.runtime.replica import Replica
from pyccm.workers.runtime.spec import Parts
from pyccm_sim.fake_provider import FakeCloud


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["worker", *argv])


def parts() -> Parts:
    return Parts(cloud=FakeCloud(), replica=Replica(), commit=Committer(controller="test"))


def test_every_controller_the_manager_knows_has_one_spec_in_its_order() -> None:
    assert tuple(SPECS) == tuple(CONTROLLERS)


@pytest.mark.parametrize(
    ("argv", "worker", "needs_cluster_id", "threads"),
    [
        (["cloud-node"], "cloud-node", False, 1),
        (["lifecycle", "--concurrent-node-probes=7"], "cloud-node-lifecycle", False, 7),
        (["service", "--shard=1/2", "--concurrent-service-syncs=3"], "service-1", True, 3),
        (["route", "--cluster-cidr=10.244.0.0/16"], "route", True, 1),
    ],
)
def test_a_plan_names_the_worker_and_says_whether_the_cloud_needs_the_cluster_id(
    argv: list[str], worker: str, needs_cluster_id: bool, threads: int
) -> None:
    args = parse(*argv)
    plan = SPECS[canonical(argv[0])].prepare(args)
    assert (plan.worker, plan.needs_cluster_id) == (worker, needs_cluster_id)
    controller, built_threads = plan.build(parts())
    assert controller.name == worker
    assert built_threads == threads


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["route", "--cluster-cidr="], "--cluster-cidr is empty"),
        (["route", "--cluster-cidr=10.244.0.0"], "is not a CIDR"),
        (["route", "--cluster-cidr=10.244.0.0/16", "--configure-cloud-routes=false"], "false"),
    ],
)
def test_flags_that_turn_the_route_controller_off_need_no_cluster_id(
    argv: list[str], reason: str
) -> None:
    plan = SPECS["route"].prepare(parse(*argv))
    assert not plan.needs_cluster_id
    with pytest.raises(Disabled, match=reason):
        plan.build(parts())


def test_the_service_plan_carries_the_classes_it_claims() -> None:
    plan = SPECS["service"].prepare(parse("service", "--load-balancer-class=example.com/a"))
    assert plan.classes.claims("example.com/a")
    assert not plan.classes.claims("example.com/b")


def test_a_bad_service_flag_is_a_config_error_before_anything_is_built() -> None:
    with pytest.raises(ConfigError, match="--shard"):
        SPECS["service"].prepare(parse("service", "--shard=1"))


@pytest.mark.parametrize(
    "flag", ["--concurrent-node-syncs", "--concurrent-node-probes", "--concurrent-service-syncs"]
)
def test_a_count_of_threads_below_one_is_refused(
    flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse("service", f"{flag}=0")
    assert exit_.value.code == 2
    assert f"argument {flag}: '0': must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "status_workers"),
    [
        ([], 1),
        (["--concurrent-node-syncs=4"], 4),
        (["--concurrent-node-syncs=4", "--concurrent-node-status-updates=0"], 4),
        (["--concurrent-node-syncs=4", "--concurrent-node-status-updates=9"], 9),
    ],
)
def test_node_status_updates_default_to_the_node_syncs_and_run_in_their_own_lane(
    argv: list[str], status_workers: int
) -> None:
    controller, _ = SPECS["cloud-node"].prepare(parse("cloud-node", *argv)).build(parts())
    (lane,) = controller.lanes
    assert (lane.prefix, lane.workers) == ("addresses/", status_workers)


def test_a_negative_count_of_node_status_updates_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse("cloud-node", "--concurrent-node-status-updates=-1")
    assert exit_.value.code == 2
    assert (
        "argument --concurrent-node-status-updates: '-1': cannot be a negative number"
        in capsys.readouterr().err
    )
