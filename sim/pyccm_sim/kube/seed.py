"""The seeded cluster: Nodes as a kubelet with `--cloud-provider=external` registers them,
LoadBalancer Services across a few namespaces, and the "kubelet" that flips Ready.

Node `i` is `sim.scenario.seed_node(i)` (name, InternalIP, podCIDR), so the OpenStack
simulator seeds the matching server. A new node carries the
`node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule` taint, InternalIP and
Hostname addresses, a Ready=True condition and a realistic `nodeInfo`/capacity block, so
that decoding costs in benchmarks are those of real nodes. Seeded objects go through
`KubeApi.create`, the same path as a client's POST.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import msgspec

from pyccm_sim.kube.api import KubeApi
from pyccm_sim.kube.objects import now_rfc3339
from pyccm_sim.kube.resources import NAMESPACES, NODES, SERVICES
from pyccm_sim.kube.store import Entry
from pyccm_sim.scenario import seed_node

Obj = dict[str, Any]

UNINITIALIZED_TAINT = "node.cloudprovider.kubernetes.io/uninitialized"
SERVICE_NAMESPACES = ("default", "team-a", "team-b", "team-c")


def node_object(index: int, *, clock: float) -> Obj:
    seed = seed_node(index)
    stamp = now_rfc3339(clock)
    return {
        "metadata": {
            "name": seed.name,
            "labels": {
                "kubernetes.io/hostname": seed.name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {
            "podCIDR": seed.pod_cidr,
            "podCIDRs": [seed.pod_cidr],
            "taints": [{"key": UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule"}],
        },
        "status": _node_status(seed.name, seed.internal_ip, stamp),
    }


def _node_status(name: str, internal_ip: str, stamp: str) -> Obj:
    capacity = {
        "cpu": "4",
        "ephemeral-storage": "81106868Ki",
        "hugepages-2Mi": "0",
        "memory": "16393244Ki",
        "pods": "110",
    }
    return {
        "capacity": capacity,
        "allocatable": {**capacity, "memory": "16290844Ki", "ephemeral-storage": "74746494282"},
        "conditions": [
            _condition(
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
                stamp,
            ),
            _condition(
                "DiskPressure",
                "False",
                "KubeletHasNoDiskPressure",
                "kubelet has no disk pressure",
                stamp,
            ),
            _condition(
                "PIDPressure",
                "False",
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
                stamp,
            ),
            _condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", stamp),
        ],
        "addresses": [
            {"type": "InternalIP", "address": internal_ip},
            {"type": "Hostname", "address": name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": _digest(name, "machine"),
            "systemUUID": _digest(name, "system"),
            "bootID": _digest(name, "boot"),
            "kernelVersion": "6.8.0-45-generic",
            "osImage": "Ubuntu 24.04.1 LTS",
            "containerRuntimeVersion": "containerd://1.7.22",
            "kubeletVersion": "v1.31.1",
            "kubeProxyVersion": "v1.31.1",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
        "images": [
            {"names": [f"registry.k8s.io/{image}"], "sizeBytes": size}
            for image, size in (
                ("kube-proxy:v1.31.1", 30210400),
                ("pause:3.10", 320368),
                ("coredns/coredns:v1.11.3", 18562039),
            )
        ],
    }


def _digest(name: str, purpose: str) -> str:
    return hashlib.sha256(f"{purpose}:{name}".encode()).hexdigest()[:32]


def _condition(kind: str, status: str, reason: str, message: str, stamp: str) -> Obj:
    return {
        "type": kind,
        "status": status,
        "lastHeartbeatTime": stamp,
        "lastTransitionTime": stamp,
        "reason": reason,
        "message": message,
    }


def service_object(index: int, *, service_type: str = "LoadBalancer") -> tuple[str, Obj]:
    namespace = SERVICE_NAMESPACES[index % len(SERVICE_NAMESPACES)]
    name = f"svc-{index:05d}"
    ports = [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]
    if index % 3 == 0:
        ports.append({"name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP"})
    return namespace, {
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {"type": service_type, "selector": {"app": name}, "ports": ports},
    }


def seed(
    api: KubeApi,
    *,
    nodes: int,
    services: int,
    cluster_ip_services: int = 0,
    first_node: int = 0,
) -> None:
    """Add nodes `first_node..first_node+nodes-1`, `services` LoadBalancer Services, then
    `cluster_ip_services` ClusterIP Services (most Services of a large cluster are: a CCM
    must ignore them cheaply)."""
    for namespace in SERVICE_NAMESPACES:
        if api.store.get(NAMESPACES, ("", namespace)) is None:
            api.create(NAMESPACES, "", {"metadata": {"name": namespace}})
    clock = api.clock()
    for index in range(first_node, first_node + nodes):
        api.create(NODES, "", node_object(index, clock=clock))
    existing = api.store.count(SERVICES)
    kinds = ["LoadBalancer"] * services + ["ClusterIP"] * cluster_ip_services
    for index, service_type in enumerate(kinds, start=existing):
        namespace, body = service_object(index, service_type=service_type)
        api.create(SERVICES, namespace, body)


def set_node_ready(api: KubeApi, name: str, status: str, *, reason: str = "") -> Entry:
    """What a kubelet (or the node-lifecycle controller) does: set the Ready condition.
    `status` is "True", "False" or "Unknown"; the transition time moves only on change."""
    if status not in ("True", "False", "Unknown"):
        raise ValueError(f"Ready status must be True, False or Unknown, not {status!r}")
    current = api.get(NODES, "", name)
    stamp = now_rfc3339(api.clock())
    conditions = current.obj.get("status", {}).get("conditions", [])
    before = next((c for c in conditions if c.get("type") == "Ready"), None)
    changed = before is None or before.get("status") != status
    transition = stamp if changed or before is None else before.get("lastTransitionTime", stamp)
    default_reason = {
        "True": "KubeletReady",
        "False": "KubeletNotReady",
        "Unknown": "NodeStatusUnknown",
    }
    condition = {
        "type": "Ready",
        "status": status,
        "lastHeartbeatTime": stamp,
        "lastTransitionTime": transition,
        "reason": reason or default_reason[status],
        "message": "set by the simulator's kubelet helper",
    }
    patch = {"status": {"conditions": [condition]}}
    return api.patch(
        NODES,
        "",
        name,
        "application/strategic-merge-patch+json",
        msgspec.json.encode(patch),
        subresource="status",
    )


CHURN_ANNOTATION = "sim.pyccm.io/churn"


async def churn(api: KubeApi, *, count: int, batch: int = 200) -> int:
    """Write `count` MODIFIED events by bumping an annotation on nodes round-robin, in
    batches that yield to the event loop so watchers drain as they would under load.
    It writes through the store directly (no validation): it exists to measure watch
    delivery, not the write path."""
    written = 0
    while written < count:
        # Re-read the node names each batch: a client may delete nodes in between.
        nodes = api.store.objects[NODES]
        refs = list(nodes)
        if not refs:
            return written
        for _ in range(min(batch, count - written)):
            obj = nodes[refs[written % len(refs)]].thaw()
            obj["metadata"].setdefault("annotations", {})[CHURN_ANNOTATION] = str(written)
            api.store.put(NODES, obj)
            written += 1
        await asyncio.sleep(0)
    return written
