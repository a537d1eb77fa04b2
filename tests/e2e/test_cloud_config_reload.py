"""docs/features.md#reload-cloudconf-without-a-restart in the real process tree against both
simulators: the workers follow a change of `cloud.conf` without a restart (upstream reads it
once: kubernetes/cloud-provider-openstack#2284, kubernetes/kubernetes#62376).

`cloud.conf` is mounted as Kubernetes mounts a Secret (`cloud.conf -> ..data/cloud.conf`,
`..data -> ..<version>`), and every change is published as the kubelet publishes one: a new
directory, then one rename of a new `..data` link. The tree polls every second.

* A new `[LoadBalancer] lb-method` reaches a new Service's pools and, by the resync the
  reload triggers, the pools of a Service that already had its load balancer; the service
  worker's pid is the same, it logs one `reloaded: [LoadBalancer] changed` line and counts
  the reload.
* A password rotated in Keystone (old tokens revoked), then in `cloud.conf`: the workers
  get a new Keystone session and the next Service gets its load balancer.
* A malformed file (a bad value, then a bad section header) leaves the settings in force:
  one WARNING line per file and worker naming the file, section and key, never the value
  (here the password itself) or a secret; the failure counted and
  `pyccm_cloud_config_last_reload_successful` 0 until a good file is back.
* With polling off (`--cloud-config-reload-period=0`), SIGHUP reloads the signalled worker
  only, and no longer ends it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from pyccm.exposition import pod_registry
from pyccm_sim.demo import World, process_tree, simulators
from tests.support.tree import (
    FINALIZER,
    LB_ID,
    Cloud,
    Kube,
    ingress_ips,
    initialized,
    supervisorctl,
)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

NODES = ["node-0000", "node-0001"]
SERVICE_WORKER = "worker-service:worker-service-0"
CONVERGE = 60.0
RELOADED = "pyccm.workers.runtime.reload: cloud config"


class SecretMount:
    """`cloud.conf` laid out and updated as the kubelet does for a Secret volume."""

    def __init__(self, directory: Path, text: str) -> None:
        self.directory = directory
        self.version = 0
        directory.mkdir()
        self.publish(text)
        (directory / "cloud.conf").symlink_to("..data/cloud.conf")

    @property
    def path(self) -> Path:
        return self.directory / "cloud.conf"

    def publish(self, text: str) -> None:
        self.version += 1
        version = self.directory / f"..v{self.version}"
        version.mkdir()
        (version / "cloud.conf").write_text(text)
        staged = self.directory / "..data_tmp"
        staged.symlink_to(version.name)
        os.replace(staged, self.directory / "..data")
        if self.version > 1:
            shutil.rmtree(self.directory / f"..v{self.version - 1}")


@dataclass
class ReloadTree:
    world: World
    kube: Kube
    cloud: Cloud
    mount: SecretMount
    # The seeded cloud.conf; every test publishes it with its own [LoadBalancer] lines.
    base: str
    seeded_password: str
    # The password Keystone accepts now (a test rotates it).
    password: str

    def publish(self, extra: str = "") -> None:
        """`cloud.conf` as seeded, with the password in force and `extra` appended."""
        text = self.base.replace(
            f"password = {self.seeded_password}", f"password = {self.password}"
        )
        self.mount.publish(text + "\n" + extra + "\n")

    def log_lines(self, process: str, text: str) -> list[str]:
        """Lines of `process` (`service`, `cloud-node`, ...) in tree.log holding `text`."""
        lines = (self.world.workdir / "tree.log").read_text(errors="replace").splitlines()
        return [line for line in lines if line.split()[1:2] == [process] and text in line]

    def metric(self, name: str, **labels: str) -> float:
        registry = pod_registry(str(self.world.workdir / "run" / "metrics"))
        return registry.get_sample_value(name, labels) or 0.0

    def pid(self, program: str = SERVICE_WORKER) -> int:
        return int(supervisorctl(self.world, "pid", program).strip())


@contextmanager
def reload_tree(request: pytest.FixtureRequest, *, period: str) -> Iterator[ReloadTree]:
    """Both simulators and the tree, its `cloud.conf` behind a Secret-style mount; the
    temporary directory stays when a test failed (`tree.log`, `openstack.log`)."""
    failed_before = request.session.testsfailed
    workdir = Path(tempfile.mkdtemp(prefix="pyccm-e2e-reload-"))
    with ExitStack() as stack:
        world = stack.enter_context(simulators(workdir, nodes=len(NODES), latency=0))
        base = world.cloud_conf.read_text()
        mount = SecretMount(workdir / "cloud-config", base)
        password = next(
            line.split("=", 1)[1].strip()
            for line in base.splitlines()
            if line.startswith("password")
        )
        mounted = replace(world, cloud_conf=mount.path)
        stack.enter_context(
            process_tree(mounted, worker_args=f"--cloud-config-reload-period={period}")
        )
        kube = Kube(world.kubeconfig)
        stack.callback(kube.client.close)
        cloud = Cloud(world.cloud_url, world.cloud_conf.parent / "clouds.yaml")
        wait_for(lambda: initialized(kube, NODES), timeout=CONVERGE, what="nodes initialized")
        yield ReloadTree(mounted, kube, cloud, mount, base, password, password)
    if request.session.testsfailed == failed_before:
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def tree(request: pytest.FixtureRequest) -> Iterator[ReloadTree]:
    with reload_tree(request, period="1s") as tree:
        yield tree


def balanced(tree: ReloadTree, name: str) -> str:
    """The id of the Service's ACTIVE load balancer, once it is the Service's ingress."""

    def probe() -> str | None:
        service = tree.kube.service(name)
        lbs = tree.cloud.lbs_named(f"kube_service_demo_default_{name}")
        if service is None or len(lbs) != 1 or lbs[0]["provisioning_status"] != "ACTIVE":
            return None
        meta = service["metadata"]
        if not ingress_ips(service) or FINALIZER not in meta.get("finalizers", []):
            return None
        lb_id: str = lbs[0]["id"]
        return lb_id if meta.get("annotations", {}).get(LB_ID) == lb_id else None

    return wait_for(probe, timeout=CONVERGE, what=f"Service {name} balanced")


def algorithms(tree: ReloadTree, lb_id: str) -> set[str]:
    return {pool.lb_algorithm for pool in tree.cloud.pools_of(lb_id)}


def test_a_new_lb_method_reaches_new_and_existing_services_without_a_restart(
    tree: ReloadTree,
) -> None:
    tree.kube.create_service("before")
    before = balanced(tree, "before")
    assert algorithms(tree, before) == {"ROUND_ROBIN"}
    pid = tree.pid()

    tree.publish("[LoadBalancer]\nlb-method = LEAST_CONNECTIONS")

    wait_for(
        lambda: algorithms(tree, before) == {"LEAST_CONNECTIONS"},
        timeout=CONVERGE,
        what="the existing Service's pools follow the new lb-method",
    )
    tree.kube.create_service("after")
    assert algorithms(tree, balanced(tree, "after")) == {"LEAST_CONNECTIONS"}
    assert tree.pid() == pid
    lines = tree.log_lines("service", RELOADED)
    assert len(lines) == 1, lines
    assert f"cloud config {tree.mount.path} reloaded: [LoadBalancer] changed" in lines[0]
    assert (
        tree.metric("pyccm_cloud_config_reloads_total", controller="service", result="success") == 1
    )
    assert tree.log_lines("service", "running lb-resync now for the new cloud settings")


def test_a_rotated_password_keeps_the_workers_working(tree: ReloadTree) -> None:
    pid = tree.pid()
    rotated = "rotated-" + tree.seeded_password
    # The operator rotates the password in Keystone and revokes the old tokens ...
    tree.cloud.set_knobs(keystone_password=rotated)
    tree.cloud._admin("POST", "/tokens/revoke")
    # ... then in the cloud-config Secret (and in the clouds.yaml this test reads with).
    tree.password = rotated
    tree.publish("[LoadBalancer]\nlb-method = LEAST_CONNECTIONS")
    seeded_yaml = tree.world.workdir / "cloud" / "clouds.yaml"
    rotated_yaml = tree.world.workdir / "clouds-rotated.yaml"
    rotated_yaml.write_text(seeded_yaml.read_text().replace(tree.seeded_password, rotated))
    tree.cloud = Cloud(tree.world.cloud_url, rotated_yaml)

    wait_for(
        lambda: tree.log_lines("service", "reloaded: [Global] changed"),
        timeout=CONVERGE,
        what="the service worker reloads the new password",
    )
    tree.kube.create_service("rotated")
    assert algorithms(tree, balanced(tree, "rotated")) == {"LEAST_CONNECTIONS"}
    assert tree.pid() == pid
    log = (tree.world.workdir / "tree.log").read_text(errors="replace")
    assert tree.seeded_password not in log
    assert rotated not in log


def test_a_malformed_file_leaves_the_settings_in_force(tree: ReloadTree) -> None:
    password = tree.password
    pid = tree.pid()
    failures = tree.metric(
        "pyccm_cloud_config_reloads_total", controller="service", result="failure"
    )
    # A bad value that is a secret: the log line must say where, never what.
    tree.publish(f"[LoadBalancer]\nlb-method = SOURCE_IP\ncreate-monitor = {password}")

    wait_for(
        lambda: (
            tree.metric("pyccm_cloud_config_reloads_total", controller="service", result="failure")
            == failures + 1
        ),
        timeout=CONVERGE,
        what="the service worker refuses the bad file",
    )
    assert tree.metric("pyccm_cloud_config_last_reload_successful", controller="service") == 0
    # A Service synced meanwhile gets the settings in force (several polls happen meanwhile).
    tree.kube.create_service("during-bad")
    assert algorithms(tree, balanced(tree, "during-bad")) == {"LEAST_CONNECTIONS"}
    refused = tree.log_lines("service", "cloud config not reloaded")
    assert len(refused) == 1, refused
    assert "WARNING" in refused[0]
    assert f"{tree.mount.path}:" in refused[0]
    assert "[LoadBalancer] create-monitor" in refused[0]
    assert password not in refused[0]

    # A bad section header next: one more line, still nothing quoted.
    tree.publish("[LoadBalancer\nlb-method = SOURCE_IP")
    wait_for(
        lambda: len(tree.log_lines("service", "cloud config not reloaded")) == 2,
        timeout=CONVERGE,
        what="the second bad file refused",
    )
    assert "malformed section header" in tree.log_lines("service", "cloud config not reloaded")[1]

    # A good file again: in force, and the gauge says so.
    tree.publish("[LoadBalancer]\nlb-method = SOURCE_IP")
    wait_for(
        lambda: tree.metric("pyccm_cloud_config_last_reload_successful", controller="service") == 1,
        timeout=CONVERGE,
        what="the good file accepted",
    )
    tree.kube.create_service("fixed")
    assert algorithms(tree, balanced(tree, "fixed")) == {"SOURCE_IP"}
    assert tree.pid() == pid
    log = (tree.world.workdir / "tree.log").read_text(errors="replace")
    assert password not in log


@pytest.fixture(scope="module")
def hup_tree(request: pytest.FixtureRequest, tree: ReloadTree) -> Iterator[ReloadTree]:
    # Started after the polling tree's tests (it depends on that fixture to run second),
    # so the 2-core machine never runs both trees at once.
    with reload_tree(request, period="0") as hup:
        yield hup


def test_sighup_reloads_the_signalled_worker_and_polling_can_be_turned_off(
    hup_tree: ReloadTree,
) -> None:
    pid = hup_tree.pid()
    hup_tree.publish("[LoadBalancer]\nlb-method = SOURCE_IP")

    supervisorctl(hup_tree.world, "signal", "HUP", SERVICE_WORKER)

    wait_for(
        lambda: hup_tree.log_lines("service", "reloaded: [LoadBalancer] changed"),
        timeout=CONVERGE,
        what="the service worker reloads on SIGHUP",
    )
    assert hup_tree.pid() == pid
    hup_tree.kube.create_service("hup")
    assert algorithms(hup_tree, balanced(hup_tree, "hup")) == {"SOURCE_IP"}
    # The node worker, not signalled and not polling, still has the file it started with.
    assert not hup_tree.log_lines("cloud-node", RELOADED)
