"""A running OpenStack provider re-reads `cloud.conf` when its content changes
(docs/features.md#reload-cloudconf-without-a-restart): new `[LoadBalancer]` defaults apply to the
next ensure, new credentials get a new Keystone session, `[Networking]` and `[Route]` apply to the
next call; a bad file changes nothing and its error quotes no value. Checked against the simulator's
objects and call log, with the same provider objects before and after (no restart)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from pyccm.provider.errors import CloudError, ConfigError
from pyccm.provider.interface import ConfigChange, Instances, LoadBalancers, ReloadableCloud
from pyccm.provider.openstack.cloud import OpenStackCloud
from pyccm.provider.openstack.config import load_settings
from pyccm.provider.openstack.reload import HIDDEN
from pyccm.provider.openstack.transport.client import build_client
from pyccm.provider.settings import ProviderSettings
from pyccm_sim.openstack.testing import OpenStackSimHandle
from tests.support.lb import ensure, nodes, service
from tests.support.nodes import node
from tests.support.openstack import CloudUnderTest, MakeCloud

ROTATED = "rotated-pyccm-password"


def conf_path(under_test: CloudUnderTest) -> Path:
    return under_test.cloud.settings.path


def rewrite(under_test: CloudUnderTest, old: str, new: str) -> None:
    path = conf_path(under_test)
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def append(under_test: CloudUnderTest, extra: str) -> None:
    path = conf_path(under_test)
    path.write_text(path.read_text() + "\n" + extra + "\n")


def reload(under_test: CloudUnderTest) -> ConfigChange | None:
    return under_test.cloud.reload_config()


def settled(make_cloud: MakeCloud, extra: str = "", *, conf: str | None = None) -> CloudUnderTest:
    """A cloud whose first reload (which always parses once) is done."""
    under_test = make_cloud(extra, conf=conf)
    assert reload(under_test) == ConfigChange(source=str(conf_path(under_test)))
    return under_test


def load_balancers(under_test: CloudUnderTest) -> LoadBalancers:
    lbs = under_test.cloud.load_balancers()
    assert lbs is not None
    return lbs


def instances(under_test: CloudUnderTest) -> Instances:
    found = under_test.cloud.instances()
    assert found is not None
    return found


def algorithms(sim: OpenStackSimHandle, lb_id: str) -> set[str]:
    """The pools' algorithms, read through the Octavia API as an operator would."""
    pools = sim.connection().load_balancer.pools()
    return {p.lb_algorithm for p in pools if lb_id in {r["id"] for r in p.loadbalancers or []}}


def lb_id(outcome: Any) -> str:
    return str(outcome.annotations_to_set["loadbalancer.openstack.org/load-balancer-id"])


def provider_id(sim: OpenStackSimHandle, name: str) -> str:
    return "openstack:///" + next(
        str(s["id"]) for s in sim.resources("server") if s["name"] == name
    )


# --- what is read, and when ---------------------------------------------------------------------


def test_the_openstack_cloud_offers_reloading(make_cloud: MakeCloud) -> None:
    assert isinstance(make_cloud().cloud, ReloadableCloud)


def test_unchanged_content_is_not_read_again_and_a_comment_changes_no_setting(
    make_cloud: MakeCloud,
) -> None:
    under_test = settled(make_cloud)
    settings = under_test.cloud.settings

    assert reload(under_test) is None
    append(under_test, "# an operator's note")
    assert reload(under_test) == ConfigChange(source=str(conf_path(under_test)))
    assert under_test.cloud.settings is settings
    assert reload(under_test) is None


def cloud_on(path: Path) -> OpenStackCloud:
    provider_settings = ProviderSettings(cloud_config=path)
    settings = load_settings(path, environ={})
    client = build_client(
        settings=settings, provider_settings=provider_settings, registry=CollectorRegistry()
    )
    return OpenStackCloud(client=client, settings=settings, provider_settings=provider_settings)


def test_a_kubernetes_secret_update_swapping_the_data_symlink_is_seen(
    sim: OpenStackSimHandle, tmp_path: Path
) -> None:
    # The layout of a mounted Secret: cloud.conf -> ..data/cloud.conf, ..data -> ..<stamp>.
    mount = tmp_path / "secret"
    (mount / "..2025_01").mkdir(parents=True)
    (mount / "..2025_01" / "cloud.conf").write_text(sim.cloud_conf_path.read_text())
    (mount / "..data").symlink_to("..2025_01")
    (mount / "cloud.conf").symlink_to("..data/cloud.conf")
    cloud = cloud_on(mount / "cloud.conf")
    assert cloud.reload_config() is not None  # the first look parses once
    assert cloud.reload_config() is None

    # The kubelet's atomic update: a new directory, then one rename of a new ..data link.
    (mount / "..2025_02").mkdir()
    text = sim.cloud_conf_path.read_text() + "\n[LoadBalancer]\nlb-method = SOURCE_IP\n"
    (mount / "..2025_02" / "cloud.conf").write_text(text)
    (mount / "..data_tmp").symlink_to("..2025_02")
    os.replace(mount / "..data_tmp", mount / "..data")

    change = cloud.reload_config()
    cloud.close()
    assert change is not None
    assert change.sections == ("LoadBalancer",)
    assert cloud.settings.load_balancer.lb_method == "SOURCE_IP"


# --- [LoadBalancer] --------------------------------------------------------------------------


def test_a_new_lb_method_reaches_the_next_ensure_and_an_existing_load_balancer(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    sim.set_knobs(provisioning_delay_s=0.0)  # reset() restores 50 ms; ensure() does not wait
    under_test = settled(make_cloud)
    lbs = load_balancers(under_test)
    backends = nodes(2, sim=sim)
    first = lb_id(ensure(lbs, service("first"), backends))
    assert algorithms(sim, first) == {"ROUND_ROBIN"}

    append(under_test, "[LoadBalancer]\nlb-method = LEAST_CONNECTIONS")
    change = reload(under_test)

    assert change is not None
    assert change.sections == ("LoadBalancer",)
    assert change.capabilities == frozenset({"load_balancers"})
    assert change.need_restart == ()
    assert load_balancers(under_test) is lbs  # the same provider: nothing was rebuilt
    second = lb_id(ensure(lbs, service("second"), backends))
    assert algorithms(sim, second) == {"LEAST_CONNECTIONS"}
    # The existing load balancer follows at its next ensure (the worker resyncs at once).
    ensure(lbs, service("first"), backends)
    assert algorithms(sim, first) == {"LEAST_CONNECTIONS"}


def test_turning_load_balancers_off_waits_for_a_restart(make_cloud: MakeCloud) -> None:
    under_test = settled(make_cloud)
    lbs = load_balancers(under_test)

    append(under_test, "[LoadBalancer]\nenabled = false")
    change = reload(under_test)

    assert change is not None
    assert change.need_restart == ("[LoadBalancer] enabled",)
    assert load_balancers(under_test) is lbs


# --- [Global] --------------------------------------------------------------------------------


def test_a_rotated_password_gets_a_new_keystone_session_and_calls_keep_working(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    under_test = settled(make_cloud)
    server = node("x", provider_id=provider_id(sim, "node-0001"))
    assert instances(under_test).instance_exists(node=server)
    old_password = sim.credentials.password

    # The operator rotates the password in Keystone; the old tokens are revoked.
    sim.set_knobs(keystone_password=ROTATED)
    sim.revoke_tokens()
    with pytest.raises(CloudError) as refused:
        instances(under_test).instance_exists(node=server)
    assert old_password not in str(refused.value)

    rewrite(under_test, f"password = {old_password}", f"password = {ROTATED}")
    mark = sim.mark()
    change = reload(under_test)

    assert change is not None
    assert change.sections == ("Global",)
    assert change.capabilities == frozenset()
    assert instances(under_test).instance_exists(node=server)
    made = sim.calls(since=mark)
    tokens = [c for c in made if c.service == "identity" and c.method == "POST"]
    assert [c.status for c in tokens] == [201]


def test_a_password_rotated_in_the_clouds_yaml_it_points_to_is_picked_up(
    sim: OpenStackSimHandle, make_cloud: MakeCloud, tmp_path: Path
) -> None:
    clouds = tmp_path / "clouds.yaml"
    clouds.write_text(sim.clouds_yaml_path.read_text())
    conf = f"[Global]\nuse-clouds = true\nclouds-file = {clouds}\ncloud = {sim.cloud_name}\n"
    under_test = settled(make_cloud, conf=conf)
    server = node("x", provider_id=provider_id(sim, "node-0001"))
    assert instances(under_test).instance_exists(node=server)

    sim.set_knobs(keystone_password=ROTATED)
    sim.revoke_tokens()
    clouds.write_text(clouds.read_text().replace(sim.credentials.password, ROTATED))
    change = reload(under_test)

    assert change is not None
    assert change.sections == ("Global",)
    assert instances(under_test).instance_exists(node=server)


def test_a_call_under_way_during_a_credentials_reload_finishes_on_its_connection(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    under_test = settled(make_cloud)
    server = node("node-0001", provider_id=provider_id(sim, "node-0001"))
    instances(under_test).instance_metadata(node=server)  # token and discovery done
    old_connection = under_test.cloud.client.connection
    sim.set_knobs(keystone_password=ROTATED, latency_ms=300)  # old tokens stay valid
    results: list[object] = []
    call = threading.Thread(
        target=lambda: results.append(instances(under_test).instance_metadata(node=server))
    )

    call.start()
    rewrite(under_test, f"password = {sim.credentials.password}", f"password = {ROTATED}")
    assert reload(under_test) is not None
    call.join(timeout=30)

    assert len(results) == 1
    assert results[0].provider_id == server.spec.provider_id  # type: ignore[attr-defined]
    assert under_test.cloud.client.connection is not old_connection
    sim.set_knobs(latency_ms=0)
    sim.revoke_tokens()
    assert instances(under_test).instance_exists(node=server)


# --- [Networking] and [Route] ---------------------------------------------------------------


def test_networking_changes_apply_to_the_next_instance_call(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    under_test = settled(make_cloud)
    server = node("node-0001", provider_id=provider_id(sim, "node-0001"))
    before = instances(under_test).instance_metadata(node=server).node_addresses
    assert "InternalIP" in {a.type for a in before}

    append(under_test, "[Networking]\npublic-network-name = private")
    change = reload(under_test)

    assert change is not None
    assert change.capabilities == frozenset({"instances"})
    after = instances(under_test).instance_metadata(node=server).node_addresses
    internal = {a.address for a in before if a.type == "InternalIP"}
    assert {a.address for a in after if a.type == "ExternalIP"} >= internal
    assert not any(a.type == "InternalIP" for a in after)


def test_a_new_router_id_moves_the_next_route_listing_to_that_router(
    sim: OpenStackSimHandle, make_cloud: MakeCloud
) -> None:
    under_test = settled(make_cloud)
    routes = under_test.cloud.routes()
    assert routes is not None
    other = sim.connection().network.create_router(name="other-router")
    old_router = under_test.cloud.settings.route.router_id

    rewrite(under_test, f"router-id = {old_router}", f"router-id = {other.id}")
    change = reload(under_test)
    mark = sim.mark()
    routes.list(nodes=())

    assert change is not None
    assert change.capabilities == frozenset({"routes"})
    assert under_test.cloud.routes() is routes
    paths = [c.path for c in sim.calls(since=mark)]
    assert any(other.id in p for p in paths)
    assert not any(old_router in p for p in paths)


# --- bad files ----------------------------------------------------------------------------------

# (lines appended to a good cloud.conf, where the message must point, values it must not show)
BAD_FILES = {
    "bad boolean": (
        "[LoadBalancer]\ncreate-monitor = maybe-not",
        "[LoadBalancer] create-monitor",
        ("maybe-not",),
    ),
    "bad integer": (
        "[LoadBalancer]\nmax-shared-lb = several",
        "[LoadBalancer] max-shared-lb",
        ("several",),
    ),
    "bad duration": (
        "[LoadBalancer]\nmonitor-delay = soonish",
        "[LoadBalancer] monitor-delay",
        ("soonish",),
    ),
    "unknown provider": (
        "[LoadBalancer]\nlb-provider = octopus",
        "[LoadBalancer] lb-provider",
        ("octopus",),
    ),
    "bad CIDR in a list": (
        "[Networking]\naddress-sort-order = 10.0.0.0/8, 10.300.0.0/16",
        "[Networking] address-sort-order",
        ("10.300.0.0/16",),
    ),
    "bad search order": (
        "[Metadata]\nsearch-order = carrierPigeon",
        "[Metadata] search-order",
        ("carrierPigeon",),
    ),
    "malformed section header": (
        "[LoadBalancer\nlb-method = SOURCE_IP",
        "malformed section header",
        ("SOURCE_IP",),
    ),
    "a secret in a boolean": (
        "[Global]\ntls-insecure = pyccm-sim-secret",
        "[Global] tls-insecure",
        ("pyccm-sim-secret",),
    ),
}


@pytest.mark.parametrize("bad", BAD_FILES.values(), ids=list(BAD_FILES))
def test_a_bad_file_changes_nothing_names_where_and_quotes_no_value(
    sim: OpenStackSimHandle, make_cloud: MakeCloud, bad: tuple[str, str, tuple[str, ...]]
) -> None:
    text, where, values = bad
    under_test = settled(make_cloud)
    before = under_test.cloud.settings
    append(under_test, text)

    with pytest.raises(ConfigError) as refused:
        reload(under_test)

    message = str(refused.value)
    assert message.startswith(str(conf_path(under_test)))
    assert where in message
    for value in (*values, sim.credentials.password):
        assert value not in message, message
    assert under_test.cloud.settings is before
    assert reload(under_test) is None  # the same bad content is reported once


def test_a_bad_value_is_hidden_but_its_problem_is_said(make_cloud: MakeCloud) -> None:
    under_test = settled(make_cloud)
    append(under_test, "[LoadBalancer]\ncreate-monitor = maybe")

    with pytest.raises(ConfigError) as refused:
        reload(under_test)

    assert str(refused.value).endswith(
        f"[LoadBalancer] create-monitor: {HIDDEN} is not a boolean (true/false)"
    )


def test_a_fixed_file_after_a_bad_one_is_put_in_force(make_cloud: MakeCloud) -> None:
    under_test = settled(make_cloud)
    append(under_test, "[LoadBalancer]\nlb-method = SOURCE_IP\ncreate-monitor = maybe")
    with pytest.raises(ConfigError):
        reload(under_test)

    rewrite(under_test, "create-monitor = maybe", "create-monitor = true")
    change = reload(under_test)

    assert change is not None
    assert change.sections == ("LoadBalancer",)
    lb = under_test.cloud.settings.load_balancer
    assert (lb.lb_method, lb.create_monitor) == ("SOURCE_IP", True)


def test_an_incomplete_global_section_keeps_the_connection(make_cloud: MakeCloud) -> None:
    under_test = settled(make_cloud)
    before = under_test.cloud.client.connection
    # cert-file without key-file: refused by the check before any connection is built.
    append(under_test, "[Global]\ncert-file = /nonexistent/cert.pem")

    with pytest.raises(ConfigError) as refused:
        reload(under_test)

    assert "[Global] cert-file" in str(refused.value)
    assert under_test.cloud.client.connection is before


def test_changed_sections_name_each_section_once(make_cloud: MakeCloud) -> None:
    under_test = settled(make_cloud)
    settings = under_test.cloud.settings
    append(
        under_test,
        '[LoadBalancerClass "internal"]\nsubnet-id = abc\n'
        "[Metadata]\nrequest-timeout = 30s\n[LoadBalancer]\nmonitor-delay = 7s",
    )

    change = reload(under_test)

    assert change is not None
    assert change.sections == ("LoadBalancer", "LoadBalancerClass", "Metadata")
    assert settings.changed_sections(under_test.cloud.settings) == change.sections
