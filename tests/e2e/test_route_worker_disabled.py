"""An empty `--cluster-cidr` disables the route worker, and nothing else: the tree still
initializes nodes, no route appears, the worker says why in one line and stays up, so
supervisord does not restart it in a loop (upstream exits the whole manager instead).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.support.tree import Tree, initialized, running_tree, supervisorctl
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

NODES = ["node-0000", "node-0001"]
SERVICE_WORKER = "worker-service:worker-service-0"
DISABLED = re.compile(r"route ERROR .*the route controller is disabled: --cluster-cidr")


@pytest.fixture(scope="module")
def tree(request: pytest.FixtureRequest) -> Iterator[Tree]:
    with running_tree(request, nodes=2, cluster_cidr="") as tree:
        yield tree


def test_an_empty_cluster_cidr_disables_only_the_route_worker(tree: Tree) -> None:
    wait_for(lambda: initialized(tree.kube, NODES), timeout=60, what="nodes initialized")
    log = tree.world.workdir / "tree.log"
    said = wait_for(
        lambda: [line for line in log.read_text().splitlines() if DISABLED.search(line)],
        timeout=30,
        what="the route worker says it is disabled",
    )
    assert len(said) == 1
    assert tree.cloud.routes() == set()
    # supervisord says RUNNING once the program has stayed up its `startsecs`: the line
    # above can come before that (STARTING), never a restart (BACKOFF, a second spawn).
    wait_for(
        lambda: (
            supervisorctl(tree.world, "status", "worker-route").split()[:2]
            == ["worker-route", "RUNNING"]
        ),
        timeout=30,
        what="supervisord reports the disabled route worker RUNNING",
    )
    assert log.read_text().count("spawned: 'worker-route'") == 1


def test_the_tree_log_keeps_the_processes_lines_when_supervisord_writes_again(tree: Tree) -> None:
    log = tree.world.workdir / "tree.log"
    wait_for(lambda: DISABLED.search(log.read_text()), timeout=30, what="the disabled line")
    before = log.read_text().splitlines()
    supervisorctl(tree.world, "stop", SERVICE_WORKER)
    wait_for(
        lambda: "stopped: worker-service-0" in log.read_text(),
        timeout=30,
        what="supervisord logs the stop",
    )
    lost = set(before) - set(log.read_text().splitlines())
    assert not lost
