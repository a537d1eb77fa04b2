"""`x-forwarded-port` and `x-forwarded-proto` beside `x-forwarded-for` (upstream's
cloud-provider-openstack#3038): each "true" inserts its Octavia header (`X-Forwarded-Port`,
`X-Forwarded-Proto`), any of them makes the listener and pool HTTP (TERMINATED_HTTPS with a
TLS container), they are independent, and PROXY protocol refuses them with a Warning each.
The simulator checks `insert_headers` as Octavia does."""

from __future__ import annotations

from typing import Any

import openstack.exceptions
import pytest

from pyccm.provider.errors import CloudError
from pyccm.provider.interface import LoadBalancers
from pyccm.provider.openstack.loadbalancer import service_annotations as a
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import ensure, nodes, one, service, with_annotations, writes

TRUE = "true"


def protocols(sim: OpenStackSimHandle) -> tuple[Any, Any]:
    return one(sim, "listener")["protocol"], one(sim, "pool")["protocol"]


def test_port_and_proto_headers_make_an_http_listener_that_inserts_them(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(
        ports=((80, 30080, "TCP"),),
        annotations={a.X_FORWARDED_PORT: TRUE, a.X_FORWARDED_PROTO: TRUE},
    )

    outcome = ensure(lbs, svc, nodes(1))

    assert protocols(sim) == ("HTTP", "HTTP")
    assert one(sim, "listener")["insert_headers"] == {
        "X-Forwarded-Port": "true",
        "X-Forwarded-Proto": "true",
    }
    assert outcome.events == ()


def test_headers_follow_the_annotations_and_keep_a_header_set_by_hand(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(ports=((80, 30080, "TCP"),), annotations={a.X_FORWARDED_PROTO: TRUE})
    svc = with_annotations(svc, ensure(lbs, svc, nodes(1)).annotations_to_set)
    conn = sim.connection()
    listener_id = one(sim, "listener")["id"]
    conn.load_balancer.update_listener(
        listener_id, insert_headers={"X-Forwarded-Proto": "true", "X-Real-IP": "true"}
    )
    conn.close()
    sim.settle()

    mark = sim.mark()
    changed = {a.X_FORWARDED_PROTO: "false", a.X_FORWARDED_FOR: TRUE}
    ensure(lbs, with_annotations(svc, changed), nodes(1))

    assert one(sim, "listener")["insert_headers"] == {
        "X-Forwarded-For": "true",
        "X-Real-IP": "true",
    }
    assert writes(sim, mark) == [("PUT", "lbaas/listeners/{id}")]


def test_proxy_protocol_refuses_each_forwarded_header_with_a_warning(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(
        ports=((80, 30080, "TCP"),),
        annotations={
            a.PROXY_PROTOCOL: "v2",
            a.X_FORWARDED_PORT: TRUE,
            a.X_FORWARDED_PROTO: TRUE,
        },
    )

    outcome = ensure(lbs, svc, nodes(1))

    assert protocols(sim) == ("TCP", "PROXYV2")
    assert one(sim, "listener")["insert_headers"] == {}
    messages = [e.message for e in outcome.events if e.reason == a.INVALID_ANNOTATION]
    assert len(messages) == 2
    assert messages[0].startswith(f"annotation {a.X_FORWARDED_PORT}='true' cannot be combined")
    assert messages[1].startswith(f"annotation {a.X_FORWARDED_PROTO}='true' cannot be combined")


def test_a_bad_value_warns_and_inserts_nothing(sim: OpenStackSimHandle, lbs: LoadBalancers) -> None:
    svc = service(ports=((80, 30080, "TCP"),), annotations={a.X_FORWARDED_PORT: "yes"})

    outcome = ensure(lbs, svc, nodes(1))

    assert protocols(sim) == ("TCP", "TCP")
    (event,) = outcome.events
    assert event.message.startswith(f"annotation {a.X_FORWARDED_PORT}='yes' is not true or false")


def test_a_udp_port_with_a_forwarded_header_is_refused_before_any_write(
    sim: OpenStackSimHandle, lbs: LoadBalancers
) -> None:
    svc = service(ports=((53, 30053, "UDP"),), annotations={a.X_FORWARDED_PROTO: TRUE})
    mark = sim.mark()

    with pytest.raises(CloudError, match=a.X_FORWARDED_PROTO):
        lbs.ensure(service=svc, nodes=nodes(1))

    assert writes(sim, mark) == []


@pytest.mark.parametrize(
    ("protocol", "headers", "says"),
    [
        ("TCP", {"X-Forwarded-Port": "true"}, "not a valid option for a TCP protocol listener"),
        ("HTTP", {"X-Forwarded-Host": "true"}, "is not a valid option for insert_headers"),
        ("HTTP", {"X-SSL-Client-DN": "true"}, "not a valid option for HTTP protocol listener"),
    ],
)
def test_the_simulator_checks_insert_headers_as_octavia_does(
    sim: OpenStackSimHandle, protocol: str, headers: dict[str, str], says: str
) -> None:
    conn = sim.connection()
    subnet = conn.network.find_subnet("private-subnet") or next(conn.network.subnets())
    lb = conn.load_balancer.create_load_balancer(name="hdr", vip_subnet_id=subnet.id)
    sim.settle()

    with pytest.raises(openstack.exceptions.BadRequestException, match=says):
        conn.load_balancer.create_listener(
            loadbalancer_id=lb.id, protocol=protocol, protocol_port=80, insert_headers=headers
        )
    conn.close()
