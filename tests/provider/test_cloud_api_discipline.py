"""Every cloud call is throttled, measured, retried only as the cloud asks, and never leaks
a credential — checked against the simulator's call log and fault knobs."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

import pytest
from prometheus_client import generate_latest

from pyccm.provider import registry
from pyccm.provider.errors import CloudError, InstanceNotFound, RetryAfter
from pyccm.provider.interface import Instances
from pyccm.provider.settings import ProviderSettings
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.nodes import node
from tests.support.openstack import CloudUnderTest, MakeCloud

REQUESTS = "openstack_api_requests_total"
ERRORS = "openstack_api_request_errors_total"
DURATION_COUNT = "openstack_api_request_duration_seconds_count"


def instances(under_test: CloudUnderTest) -> Instances:
    found = under_test.cloud.instances()
    assert found is not None
    return found


def provider_id(sim: OpenStackSimHandle, name: str) -> str:
    return "openstack:///" + next(
        str(s["id"]) for s in sim.resources("server") if s["name"] == name
    )


def test_every_http_request_takes_a_token_from_the_bucket_keystone_included(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    # One token to start with and a refill too slow to matter: every request after the
    # first waits (the wait is recorded, not slept). An authentication (keystoneauth's
    # discovery GET and token POST, in its child process) takes one token.
    under_test = make_cloud(qps=0.001, burst=1)

    mark = sim.mark()
    instances(under_test).instance_metadata(node=node("node-0001"))
    made = sim.calls(since=mark)
    keystone = [call for call in made if call.service == "identity"]

    assert made[0].service == "identity"
    assert [(c.method, c.path) for c in keystone] == [
        ("GET", "/identity/v3"),
        ("POST", "/identity/v3/auth/tokens"),
    ]
    assert len(under_test.slept) == len(made) - len(keystone)
    assert under_test.slept == sorted(under_test.slept)


def test_metrics_count_each_operation_by_upstream_names(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    under_test = make_cloud()
    target = node("x", provider_id=provider_id(sim, "node-0001"))

    for _ in range(3):
        instances(under_test).instance_exists(node=target)
    instances(under_test).instance_exists(node=node("x", provider_id="openstack:///gone"))

    assert under_test.metric(REQUESTS, "server_get") == 4
    assert under_test.metric(ERRORS, "server_get") == 1
    assert under_test.metric(DURATION_COUNT, "server_get") == 4


def test_a_429_with_a_short_retry_after_is_waited_for_and_repeated(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    under_test = make_cloud()
    target = node("x", provider_id=provider_id(sim, "node-0001"))
    instances(under_test).instance_exists(node=target)
    sim.fail_next("compute", 429, retry_after_s=2)

    mark = sim.mark()
    exists = instances(under_test).instance_exists(node=target)

    assert exists is True
    assert under_test.slept == [2.0]
    assert [c.status for c in sim.calls(since=mark)] == [429, 200]
    assert under_test.metric(ERRORS, "server_get") == 1


def test_a_long_retry_after_goes_back_to_the_caller_instead_of_holding_the_thread(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    under_test = make_cloud()
    target = node("x", provider_id=provider_id(sim, "node-0001"))
    instances(under_test).instance_exists(node=target)
    sim.fail_next("compute", 503, retry_after_s=30)

    with pytest.raises(RetryAfter) as caught:
        instances(under_test).instance_exists(node=target)

    assert caught.value.delay == 30.0
    assert under_test.slept == []


def test_a_cloud_that_keeps_refusing_is_tried_three_times(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    under_test = make_cloud()
    target = node("x", provider_id=provider_id(sim, "node-0001"))
    instances(under_test).instance_exists(node=target)
    sim.fail_next("compute", 503, count=5, retry_after_s=1)

    mark = sim.mark()
    with pytest.raises(RetryAfter):
        instances(under_test).instance_exists(node=target)

    assert [c.status for c in sim.calls(since=mark)] == [503, 503, 503]
    assert under_test.slept == [1.0, 1.0]


def test_a_read_answered_500_is_repeated_after_a_short_wait(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    under_test = make_cloud()
    target = node("x", provider_id=provider_id(sim, "node-0001"))
    instances(under_test).instance_exists(node=target)
    sim.fail_next("compute", 500)

    mark = sim.mark()
    exists = instances(under_test).instance_exists(node=target)

    assert exists is True
    assert [c.status for c in sim.calls(since=mark)] == [500, 200]
    assert under_test.slept == [0.2]


def test_a_read_that_keeps_failing_is_a_retryable_cloud_error_after_three_tries(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    under_test = make_cloud()
    target = node("x", provider_id=provider_id(sim, "node-0001"))
    instances(under_test).instance_exists(node=target)
    sim.fail_next("compute", 500, count=5)

    mark = sim.mark()
    with pytest.raises(CloudError) as caught:
        instances(under_test).instance_exists(node=target)

    assert [c.status for c in sim.calls(since=mark)] == [500, 500, 500]
    assert under_test.slept == [0.2, 0.4]
    assert caught.value.status == 500
    assert caught.value.retryable is True
    assert "server_get" in str(caught.value)


def test_a_write_answered_500_is_not_repeated(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    under_test = make_cloud()
    client = under_test.cloud.client
    sim.fail_next("network", 500, methods=("POST",))

    mark = sim.mark()
    with pytest.raises(CloudError) as caught:
        client.call(
            "network",
            "POST",
            "/security-groups",
            request="security_group_create",
            body={"security_group": {"name": "x"}},
            ok=(201,),
        )

    assert [(c.method, c.status) for c in sim.calls(since=mark) if c.service == "network"] == [
        ("POST", 500)
    ]
    assert under_test.slept == []
    assert caught.value.status == 500


def test_revoked_tokens_are_renewed_transparently(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    under_test = make_cloud()
    target = node("x", provider_id=provider_id(sim, "node-0001"))
    instances(under_test).instance_exists(node=target)

    sim.revoke_tokens()

    assert instances(under_test).instance_exists(node=target) is True


def test_wrong_credentials_never_show_the_password_in_errors_logs_or_metrics(
    sim: OpenStackSimHandle, make_cloud: MakeCloud, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "wrong-Pa55word-xyz"
    conf = sim.cloud_conf_path.read_text().replace(sim.credentials.password, secret)
    under_test = make_cloud(conf=conf)
    caplog.set_level(logging.DEBUG)

    with pytest.raises(CloudError) as caught:
        instances(under_test).instance_exists(node=node("node-0001"))

    assert secret not in str(caught.value)
    assert secret not in repr(caught.value.__cause__)
    assert secret not in caplog.text
    assert secret not in generate_latest(under_test.registry).decode()
    assert secret not in repr(under_test.cloud.settings)


def test_application_credentials_authenticate(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    conf = (
        f"[Global]\nauth-url = {sim.url}/identity/v3\nregion = {sim.region}\n"
        f"application-credential-name = {sim.credentials.app_credential_name}\n"
        f"application-credential-secret = {sim.credentials.app_credential_secret}\n"
        f"username = {sim.credentials.username}\nuser-domain-name = {sim.credentials.domain_name}\n"
    )
    under_test = make_cloud(conf=conf)

    assert instances(under_test).instance_exists(node=node("node-0001")) is True


def test_clouds_yaml_alone_is_enough_with_use_clouds(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    conf = (
        f"[Global]\nuse-clouds = true\nclouds-file = {sim.clouds_yaml_path}\n"
        f"cloud = {sim.cloud_name}\n"
    )
    under_test = make_cloud(conf=conf)

    assert instances(under_test).instance_exists(node=node("node-0001")) is True
    with pytest.raises(InstanceNotFound):
        instances(under_test).instance_metadata(node=node("node-0404"))


@pytest.mark.parametrize(("version", "tags"), [("2.27", True), ("2.4", False)])
def test_octavia_features_follow_the_advertised_version(
    sim: OpenStackSimHandle, make_cloud: MakeCloud, version: str, tags: bool
) -> None:
    sim.set_knobs(octavia_version=version)
    features = make_cloud().cloud.features

    assert features.octavia_version() == tuple(int(p) for p in version.split("."))
    assert features.octavia(lb_provider="amphora").tags is tags


def test_concurrent_first_calls_share_one_connection_and_one_token(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    under_test = make_cloud()
    names = [f"node-000{i % 4}" for i in range(16)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(
            pool.map(lambda n: instances(under_test).instance_exists(node=node(n)), names)
        )

    assert results == [True] * 16
    token_requests = [c for c in sim.calls() if c.service == "identity" and c.method == "POST"]
    assert len(token_requests) == 1


def test_the_registry_builds_the_openstack_provider_from_cloud_conf(
    sim: OpenStackSimHandle,
) -> None:
    settings = ProviderSettings(cloud_config=sim.cloud_conf_path)

    cloud = registry.create_cloud("openstack", settings=settings)
    try:
        found = cloud.instances()
        assert found is not None
        assert found.instance_exists(node=node("node-0001")) is True
        assert cloud.load_balancers() is not None  # [LoadBalancer] enabled = true by default
    finally:
        cloud.close()
