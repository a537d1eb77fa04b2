"""`pyccm gc` (kubernetes/cloud-provider-openstack#3145): lists what this cluster owns and no live
Service accounts for, deletes it only with `--yes`, never touches another cluster's or an untagged
resource, works with `--cluster-id` alone after the cluster is gone, and reports what it could not
delete (exit 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pyccm_sim.kube.testing import KubeSimHandle
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.cli import lb_service, pyccm
from tests.support.lb import MakeLbs, ensure, nodes, service

OTHER = "22222222-2222-2222-2222-222222222222"


@pytest.fixture
def world(
    sim: OpenStackSimHandle, kube: KubeSimHandle, make_lbs: MakeLbs, cluster_id: str
) -> dict[str, str]:
    """This cluster's live Service `default/live` and its deleted `default/gone` (both with
    a load balancer and a floating IP), another cluster's `default/theirs` and an untagged
    (upstream's) `default/legacy`. The names of the load balancers by role."""
    if kube.get("services", "live", "default") is not None:
        kube.delete("services", "live", "default")
    kube.create("services", lb_service("live"), "default")
    ours = make_lbs(cluster_id=cluster_id)
    ensure(ours, service("live"), nodes(2))
    ensure(ours, service("gone"), nodes(2))
    ensure(make_lbs(cluster_id=OTHER), service("theirs"), nodes(2))
    ensure(make_lbs(), service("legacy"), nodes(2))
    by_name = {lb["name"]: lb["id"] for lb in sim.resources("loadbalancer")}
    return {
        role: by_name[f"kube_service_kubernetes_default_{role}"]
        for role in ("live", "gone", "theirs", "legacy")
    }


def gc(sim: OpenStackSimHandle, kube: KubeSimHandle | None, *extra: str) -> Any:
    flags: list[str | Path] = ["gc", "--cloud-config", sim.cloud_conf_path, *extra]
    if kube is not None:
        flags += ["--kubeconfig", kube.kubeconfig_path]
    return pyccm(*flags)


def fip_of(sim: OpenStackSimHandle, lb_id: str) -> str:
    (lb,) = [lb for lb in sim.resources("loadbalancer") if lb["id"] == lb_id]
    (fip,) = [f for f in sim.resources("floatingip") if f["port_id"] == lb["vip_port_id"]]
    return str(fip["id"])


def test_a_dry_run_lists_only_this_clusters_orphans_and_writes_nothing(
    sim: OpenStackSimHandle, kube: KubeSimHandle, world: dict[str, str]
) -> None:
    mark = sim.mark()
    ran = gc(sim, kube, "--output", "json")
    assert ran.code == 0, ran.stderr
    listed = {(o["kind"], o["id"]) for o in ran.json()["orphans"]}
    assert listed == {
        ("load balancer", world["gone"]),
        ("floating IP", fip_of(sim, world["gone"])),
    }
    assert ran.json()["dry_run"] is True
    assert sim.writes(since=mark) == []

    table = gc(sim, kube)
    assert table.code == 0
    assert "kube_service_kubernetes_default_gone" in table.stdout
    assert "dry run: nothing was deleted" in table.stdout


def test_yes_deletes_the_orphans_and_nothing_else(
    sim: OpenStackSimHandle, kube: KubeSimHandle, world: dict[str, str]
) -> None:
    gone_fip = fip_of(sim, world["gone"])
    mark = sim.mark()
    ran = gc(sim, kube, "--yes", "--output", "json")
    assert ran.code == 0, ran.stderr
    assert {o["result"] for o in ran.json()["orphans"]} == {"deleted"}

    left = {lb["id"] for lb in sim.resources("loadbalancer")}
    assert left == {world["live"], world["theirs"], world["legacy"]}
    assert gone_fip not in {f["id"] for f in sim.resources("floatingip")}
    # Every write named the orphan load balancer or its floating IP.
    for call in sim.writes(since=mark):
        assert world["gone"] in call.path or gone_fip in call.path, call.path
    # Nothing left to collect.
    again = gc(sim, kube, "--output", "json")
    assert again.json()["orphans"] == []


def test_after_the_cluster_is_gone_its_id_finds_everything_it_owned(
    sim: OpenStackSimHandle, world: dict[str, str], cluster_id: str
) -> None:
    refused = gc(sim, None)
    assert refused.code == 2
    assert "--cluster-id" in refused.stderr

    ran = gc(sim, None, "--cluster-id", cluster_id, "--output", "json")
    assert ran.code == 0, ran.stderr
    assert ran.json()["cluster_gone"] is True
    lbs = {o["id"] for o in ran.json()["orphans"] if o["kind"] == "load balancer"}
    assert lbs == {world["live"], world["gone"]}  # never the other cluster's or the untagged


def test_what_could_not_be_deleted_is_reported_with_exit_code_1(
    sim: OpenStackSimHandle, kube: KubeSimHandle, world: dict[str, str]
) -> None:
    sim.fail_next("load-balancer", 403, count=20, methods=("DELETE",))
    ran = gc(sim, kube, "--yes")
    assert ran.code == 1
    assert f"could not delete load balancer {world['gone']}" in ran.stdout
    assert world["gone"] in {lb["id"] for lb in sim.resources("loadbalancer")}
