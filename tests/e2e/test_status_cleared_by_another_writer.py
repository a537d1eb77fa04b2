"""A Service whose `status.loadBalancer` another writer clears (a GitOps tool applying the
Service whole) gets its ingress back at the next event for it, the clearing itself, not at
the next `--lb-resync-period` (10 minutes): the real process tree against both simulators,
the status cleared by kubectl. The kube simulator serves TLS: kubectl sends its bearer
token only over TLS."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.tree import Tree, ingress_ips, initialized, running_tree
from tests.support.waiting import wait_for

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]

NODES = ["node-0000", "node-0001"]
CONVERGE = 60.0


@pytest.fixture(scope="module")
def tree(request: pytest.FixtureRequest) -> Iterator[Tree]:
    with running_tree(request, nodes=2, kube_args=("--tls",)) as tree:
        wait_for(lambda: initialized(tree.kube, NODES), timeout=CONVERGE, what="nodes initialized")
        yield tree


def kubectl(tree: Tree, *args: str) -> Any:
    done = subprocess.run(
        ["kubectl", f"--kubeconfig={tree.world.kubeconfig}", *args, "--output=json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def lb_ids(tree: Tree, service: str) -> list[str]:
    return [lb["id"] for lb in tree.cloud.lbs_named(f"kube_service_demo_default_{service}")]


@pytest.mark.parametrize(
    "patch",
    [
        {"status": {"loadBalancer": {"ingress": None}}},  # cleared
        {"status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.9", "ipMode": "VIP"}]}}},
    ],
    ids=["cleared", "overwritten"],
)
def test_a_status_another_writer_changes_is_restored_at_once_not_at_the_resync(
    tree: Tree, patch: dict[str, Any]
) -> None:
    name = "gitops-" + ("cleared" if patch["status"]["loadBalancer"]["ingress"] is None else "ip")
    tree.kube.create_service(name, ports=(80,))
    ours = wait_for(
        lambda: ingress_ips(tree.kube.service(name)), timeout=CONVERGE, what="an ingress"
    )
    lbs = lb_ids(tree, name)
    changed = kubectl(
        tree, "patch", "service", name, "--subresource=status", "--type=merge",
        f"--patch={json.dumps(patch)}",
    )  # fmt: skip
    assert ingress_ips(changed) != ours
    # --lb-resync-period is 10 minutes: only the change itself can explain this.
    wait_for(
        lambda: ingress_ips(tree.kube.service(name)) == ours,
        timeout=CONVERGE,
        what="the ingress is written back",
    )
    assert lb_ids(tree, name) == lbs
    assert ingress_ips(kubectl(tree, "get", "service", name)) == ours
