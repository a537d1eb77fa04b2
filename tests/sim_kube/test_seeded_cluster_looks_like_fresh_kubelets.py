"""The seeder registers nodes as kubelets with --cloud-provider=external do, matching the
OpenStack simulator's servers, and LoadBalancer Services across namespaces."""

from __future__ import annotations

from typing import Any

from pyccm_sim.kube.seed import SERVICE_NAMESPACES
from pyccm_sim.kube.testing import KubeSimHandle, running_kube_sim
from pyccm_sim.scenario import seed_node
from tests.support.kube_http import as_json


def test_seeded_nodes_match_the_shared_scenario(core: Any) -> None:
    nodes = as_json(core.list_node())["items"]
    expected = [seed_node(i) for i in range(3)]
    assert [n["metadata"]["name"] for n in nodes] == [s.name for s in expected]
    for node, seed in zip(nodes, expected, strict=True):
        assert node["spec"]["podCIDR"] == seed.pod_cidr
        assert node["spec"]["podCIDRs"] == [seed.pod_cidr]
        assert node["status"]["addresses"] == [
            {"type": "InternalIP", "address": seed.internal_ip},
            {"type": "Hostname", "address": seed.name},
        ]


def test_seeded_nodes_wait_for_the_cloud_provider(core: Any) -> None:
    node = as_json(core.read_node("node-0000"))
    assert node["spec"]["taints"] == [
        {
            "key": "node.cloudprovider.kubernetes.io/uninitialized",
            "value": "true",
            "effect": "NoSchedule",
        }
    ]
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    assert "providerID" not in node["spec"]


def test_seeded_services_are_load_balancers_across_namespaces(core: Any) -> None:
    services = as_json(core.list_service_for_all_namespaces())["items"]
    assert len(services) == 4
    assert {s["metadata"]["namespace"] for s in services} == {
        "default",
        "team-a",
        "team-b",
        "team-c",
    }
    for service in services:
        assert service["spec"]["type"] == "LoadBalancer"
        assert all(30000 <= p["nodePort"] <= 32767 for p in service["spec"]["ports"])
        assert service["spec"]["clusterIP"].startswith("10.")


def test_the_kubelet_helper_flips_ready_and_keeps_condition_order(kube: KubeSimHandle) -> None:
    node = kube.set_node_ready("node-0001", False, reason="KubeletStopped")
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "KubeletStopped")
    stored = kube.get("nodes", "node-0001")
    assert stored is not None
    types = [c["type"] for c in stored["status"]["conditions"]]
    assert types == ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]


def test_seeding_more_nodes_continues_the_numbering(kube: KubeSimHandle) -> None:
    kube.seed(nodes=2)
    names = [n["metadata"]["name"] for n in kube.list_objects("nodes")]
    assert names == ["node-0000", "node-0001", "node-0002", "node-0003", "node-0004"]


def test_cluster_ip_services_are_seeded_after_the_load_balancers() -> None:
    with running_kube_sim(seed_services=2, seed_cluster_ip_services=3) as kube:
        kube.seed(services=1, cluster_ip_services=1)
        services = [kube.get("services", f"svc-{i:05d}", namespace=_namespace(i)) for i in range(7)]
    types = [s["spec"]["type"] if s else None for s in services]
    assert types == ["LoadBalancer"] * 2 + ["ClusterIP"] * 3 + ["LoadBalancer", "ClusterIP"]
    for service in services:
        assert service is not None
        node_ports = [p.get("nodePort") for p in service["spec"]["ports"]]
        assert all(node_ports) == (service["spec"]["type"] == "LoadBalancer")


def _namespace(index: int) -> str:
    return SERVICE_NAMESPACES[index % len(SERVICE_NAMESPACES)]
