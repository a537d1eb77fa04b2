"""Every kustomize overlay in deploy/, rendered by `kubectl kustomize`, applied to the kube
simulator with `kubectl apply`, then run exactly as the API server returns it (the command
lines, environment, volumes and probes of the applied pod templates: see kubelet.py for the
few things this machine stands in for) against both simulators. It must then do its job:
nodes initialized, a LoadBalancer Service (created with kubectl) converged, the manager's
probes answering on its HTTPS port. A flag renamed in code, a mount path or an env name
that no longer matches, fails here rather than in a user's cluster.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from pyccm_sim.demo import World, simulators
from tests.deploy import kubelet
from tests.support.tree import REPO, Cloud, Kube, ingress_ips, initialized
from tests.support.waiting import wait_for

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]

NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "system:serviceaccount:kube-system:cloud-controller-manager"
SA_TOKEN = "sa-token-cloud-controller-manager"
NODES = 3
WEB = """\
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  type: LoadBalancer
  ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30080, protocol: TCP}]
"""


@dataclass
class Cluster:
    world: World
    host: kubelet.Host
    kube: Kube

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [*self.host.kubectl, *args], input=stdin, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout


@contextmanager
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    failed_before = request.session.testsfailed
    scratch = Path(tempfile.mkdtemp(prefix="pyccm-deploy-"))
    tokens = scratch / "tokens.csv"
    tokens.write_text(f"{SA_TOKEN},{SERVICE_ACCOUNT},uid-ccm\n")
    with ExitStack() as stack:
        world = stack.enter_context(
            simulators(
                scratch,
                nodes=NODES,
                latency=0,
                kube_args=("--tls", "--token-file", str(tokens), "--rbac"),
            )
        )
        admin = yaml.safe_load(world.kubeconfig.read_text())
        admin["users"][0]["user"]["token"] = SA_TOKEN
        account_kubeconfig = scratch / "sa-kubeconfig"
        account_kubeconfig.write_text(yaml.safe_dump(admin))
        api = urlsplit(world.kube_url)
        host = kubelet.Host(
            scratch=scratch,
            kubectl=["kubectl", f"--kubeconfig={world.kubeconfig}"],
            image_paths={"/app/.venv": sys.prefix, "/app": str(REPO)},
            api_server=(api.hostname or "", api.port or 443),
            service_account_kubeconfigs={
                f"{NAMESPACE}/cloud-controller-manager": account_kubeconfig
            },
        )
        kube = Kube(world.kubeconfig)
        stack.callback(kube.client.close)
        yield Cluster(world=world, host=host, kube=kube)
    if request.session.testsfailed == failed_before:
        shutil.rmtree(scratch, ignore_errors=True)


def apply_overlay(cluster: Cluster, overlay: str) -> None:
    """What the operator guide tells an operator to run, in its order."""
    secret = cluster.kubectl(
        "create",
        "secret",
        "generic",
        "cloud-config",
        f"--namespace={NAMESPACE}",
        f"--from-file=cloud.conf={cluster.world.cloud_conf}",
        "--dry-run=client",
        "-o=yaml",
    )
    cluster.kubectl("apply", "-f", "-", stdin=secret)
    if overlay == "overlays/split":
        keys = cluster.host.scratch / "bus-keys"
        pyccm = str(Path(sys.executable).parent / "pyccm")
        workers = "--workers=node,lifecycle,service,route"
        subprocess.run([pyccm, "keys", "generate", str(keys), workers], check=True)
        secrets = subprocess.run(
            [pyccm, "keys", "secrets", str(keys), f"--namespace={NAMESPACE}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        cluster.kubectl("apply", "-f", "-", stdin=secrets)
    rendered = cluster.kubectl("kustomize", str(REPO / "deploy" / overlay))
    cluster.kubectl("apply", "-f", "-", stdin=rendered)


@contextmanager
def running_pods(cluster: Cluster) -> Iterator[list[kubelet.Pod]]:
    host = cluster.host
    pods = [pod for w in host.workloads(NAMESPACE) for pod in kubelet.pods_of(w, host)]
    services = yaml.safe_load(cluster.kubectl("get", "services", "-n", NAMESPACE, "-o", "yaml"))
    proxies = kubelet.start_services(services["items"], pods, host)
    try:
        for pod in pods:
            kubelet.start(pod, host)
        yield pods
    except BaseException:
        print("\n".join(kubelet.tail(pods)))
        raise
    finally:
        kubelet.stop(pods)
        for proxy in proxies:
            proxy.close()


def converged(cluster: Cluster, pods: list[kubelet.Pod]) -> None:
    names = [f"node-{i:04d}" for i in range(NODES)]
    wait_for(
        lambda: initialized(cluster.kube, names) or [p.name for p in pods if not p.running()],
        timeout=60,
        what="every node initialized (or a pod exited)",
    )
    assert all(p.running() for p in pods), [p.name for p in pods if not p.running()]
    cluster.kubectl("apply", "-f", "-", stdin=WEB)
    wait_for(
        lambda: ingress_ips(cluster.kube.service("web")),
        timeout=60,
        what="the LoadBalancer Service's ingress",
    )


def probed(pods: list[kubelet.Pod]) -> None:
    with_probes = [p for p in pods if "readinessProbe" in p.spec["containers"][0]]
    for pod in with_probes:
        wait_for(partial(kubelet.probe, pod), timeout=30, what=f"{pod.name} ready")
        assert kubelet.probe(pod, "livenessProbe"), pod.name


def test_the_base_runs_the_whole_tree_in_one_pod(request: pytest.FixtureRequest) -> None:
    with cluster(request) as c:
        apply_overlay(c, "base")
        with running_pods(c) as pods:
            assert [p.name for p in pods] == ["pyccm-00000", "pyccm-00001"]
            converged(c, pods)
            probed(pods)


def leader_pod(cluster: Cluster, pods: list[kubelet.Pod]) -> kubelet.Pod:
    """The manager pod whose bus address the Lease names (split mode's discovery)."""
    lease = cluster.kube.get(
        f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/cloud-controller-manager"
    )
    assert lease is not None
    endpoints = lease["metadata"].get("annotations", {}).get("pyccm.io/bus-endpoints", "")
    return next(p for p in pods if p.name.startswith("pyccm-manager") and f"//{p.ip}:" in endpoints)


def test_split_runs_each_controller_apart_and_survives_losing_the_leader(
    request: pytest.FixtureRequest,
) -> None:
    with cluster(request) as c:
        apply_overlay(c, "overlays/split")
        with running_pods(c) as pods:
            assert sorted(p.name for p in pods) == [
                "pyccm-lifecycle-00000",
                "pyccm-manager-00000",
                "pyccm-manager-00001",
                "pyccm-node-00000",
                "pyccm-route-00000",
                "pyccm-service-0",
                "pyccm-service-1",
            ]
            converged(c, pods)
            probed(pods)
            # The leader dies without releasing the Lease: the standby takes it over after
            # the lease duration, the workers move to it, and work goes on.
            leader = wait_for(lambda: leader_pod(c, pods), timeout=30, what="the leader's pod")
            for process in leader.processes:
                process.kill()
            survivors = [p for p in pods if p is not leader]
            new_leader = wait_for(
                lambda: leader_pod(c, survivors) if leader_pod(c, pods) is not leader else None,
                timeout=60,
                what="the standby leading",
            )
            assert new_leader.name != leader.name
            c.kubectl("apply", "-f", "-", stdin=WEB.replace("name: web,", "name: web2,"))
            wait_for(
                lambda: ingress_ips(c.kube.service("web2")),
                timeout=60,
                what="a Service created after the failover converged",
            )


def test_standalone_runs_one_controller_with_its_own_watch(
    request: pytest.FixtureRequest,
) -> None:
    with cluster(request) as c:
        apply_overlay(c, "overlays/standalone")
        with running_pods(c) as pods:
            assert [p.name for p in pods] == ["pyccm-route-00000"]
            cloud = Cloud(c.world.cloud_url, c.world.cloud_conf.parent / "clouds.yaml")
            wait_for(
                lambda: len(cloud.routes()) == NODES or not pods[0].running(),
                timeout=60,
                what="a route per node",
            )
            assert pods[0].running()
