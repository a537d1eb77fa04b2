"""The lean views decode the API's JSON directly, keeping only what controllers read."""

import msgspec

from pyccm.protocol.views import Node, Service

NODE_JSON = b"""{
  "kind": "Node", "apiVersion": "v1",
  "metadata": {"name": "n1", "uid": "u-1", "resourceVersion": "42",
               "labels": {"a": "b"}, "managedFields": [{"manager": "kubelet"}]},
  "spec": {"providerID": "openstack:///abc", "podCIDR": "10.0.1.0/24",
           "podCIDRs": ["10.0.1.0/24"],
           "taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized",
                       "value": "true", "effect": "NoSchedule"}]},
  "status": {"addresses": [{"type": "InternalIP", "address": "192.168.0.5"}],
             "conditions": [{"type": "Ready", "status": "True"}],
             "nodeInfo": {"kubeletVersion": "v1.31.0"}}
}"""

SERVICE_JSON = b"""{
  "metadata": {"name": "web", "namespace": "shop", "uid": "u-2", "resourceVersion": "7",
               "annotations": {"loadbalancer.openstack.org/keep-floatingip": "true"},
               "finalizers": ["service.kubernetes.io/load-balancer-cleanup"]},
  "spec": {"type": "LoadBalancer", "loadBalancerIP": "203.0.113.9",
           "ports": [{"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30080,
                      "targetPort": "http"}],
           "externalTrafficPolicy": "Local", "healthCheckNodePort": 31000},
  "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.9", "ipMode": "VIP"}]}}
}"""


def test_node_fields_come_from_api_names() -> None:
    node = msgspec.json.decode(NODE_JSON, type=Node)
    assert node.key == "n1"
    assert node.metadata.resource_version == "42"
    assert node.spec.provider_id == "openstack:///abc"
    assert node.spec.pod_cidrs == ("10.0.1.0/24",)
    assert node.has_taint("node.cloudprovider.kubernetes.io/uninitialized")
    ready = node.condition("Ready")
    assert ready is not None
    assert ready.status == "True"
    assert node.status.addresses[0].address == "192.168.0.5"


def test_service_fields_come_from_api_names() -> None:
    svc = msgspec.json.decode(SERVICE_JSON, type=Service)
    assert svc.key == "shop/web"
    assert svc.spec.load_balancer_ip == "203.0.113.9"
    assert svc.spec.ports[0].node_port == 30080
    assert svc.spec.ports[0].target_port == "http"
    assert svc.spec.health_check_node_port == 31000
    assert svc.status.load_balancer.ingress[0].ip_mode == "VIP"
    assert svc.metadata.finalizers == ("service.kubernetes.io/load-balancer-cleanup",)


def test_views_round_trip_through_msgpack() -> None:
    node = msgspec.json.decode(NODE_JSON, type=Node)
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(node), type=Node) == node
