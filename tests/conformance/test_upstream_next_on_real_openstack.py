"""Upstream's next release's load-balancer annotations on the real Octavia: the user's
tags on the load balancer, its listeners and pools beside pyccm's own, and the
X-Forwarded-Port / X-Forwarded-Proto headers on an HTTP listener. The provider's own code
against the real cloud; what it did is read back from the real Octavia."""

from __future__ import annotations

from typing import Any

import pytest

from pyccm.provider.interface import LoadBalancers
from pyccm.provider.openstack.loadbalancer import service_annotations as a
from tests.conformance.realcloud import RealCloud
from tests.conformance.test_beyond_upstream_on_real_openstack import (
    a_service,
    delete_and_wait,
    ipv4_nodes,
    lb_name,
    lbs,  # noqa: F401 (the fixture)
    the_load_balancer,
)
from tests.conformance.test_pagination_on_real_openstack import until_done

pytestmark = pytest.mark.conformance


def listeners_of(conn: Any, lb: Any) -> list[Any]:
    """The load balancer's own listeners, by the ids it lists: the real Octavia's listener
    list does not filter by `loadbalancer_id` (every listener of the project came back once
    other tests had left load balancers)."""
    return [conn.load_balancer.get_listener(item["id"]) for item in lb.listeners]


def pools_of(conn: Any, lb: Any) -> list[Any]:
    return [conn.load_balancer.get_pool(item["id"]) for item in lb.pools]


def test_user_tags_go_beside_pyccms_own(real_cloud: RealCloud, lbs: LoadBalancers) -> None:  # noqa: F811
    service = a_service(
        "tagged",
        annotations={
            a.LOAD_BALANCER_TAGS: "env=prod, team=net",
            a.LISTENER_TAGS: "front",
            a.POOL_TAGS: "back,pyccm-cluster:spoof",
        },
    )

    outcome = until_done(lambda: lbs.ensure(service=service, nodes=ipv4_nodes()))

    conn = real_cloud.connection("ccm")
    lb = the_load_balancer(conn, lb_name(service))
    assert sorted(lb.tags) == sorted([lb_name(service), "env=prod", "team=net"])
    for listener in listeners_of(conn, lb):
        assert sorted(listener.tags) == sorted([lb_name(service), "front"])
    # The pool annotation held a spoofing tag: none of its tags were written.
    assert [p.tags for p in pools_of(conn, lb)] == [[], []]
    assert [e.reason for e in outcome.events] == [a.INVALID_ANNOTATION]
    delete_and_wait(real_cloud, lbs, service)


def test_forwarded_port_and_proto_headers(real_cloud: RealCloud, lbs: LoadBalancers) -> None:  # noqa: F811
    service = a_service(
        "forwarded", annotations={a.X_FORWARDED_PORT: "true", a.X_FORWARDED_PROTO: "true"}
    )

    until_done(lambda: lbs.ensure(service=service, nodes=ipv4_nodes()))

    conn = real_cloud.connection("ccm")
    lb = the_load_balancer(conn, lb_name(service))
    for listener in listeners_of(conn, lb):
        assert listener.protocol == "HTTP"
        assert listener.insert_headers == {"X-Forwarded-Port": "true", "X-Forwarded-Proto": "true"}
    delete_and_wait(real_cloud, lbs, service)
