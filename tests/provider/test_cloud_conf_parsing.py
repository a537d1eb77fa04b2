"""`cloud.conf` means what it meant upstream: gcfg syntax, defaults, multi-valued keys."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from pyccm.flags.durations import parse_duration
from pyccm.provider.openstack.config import load_settings

MINIMAL = """\
[Global]
auth-url = http://127.0.0.1:5000/v3
username = admin
password = s3cret
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cloud.conf"
    path.write_text(text)
    return path


def test_an_upstream_style_file_gives_every_documented_value(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
; a comment
# another comment
[Global]
auth-url = "http://keystone:5000/v3"
Username = admin   ; trailing comment
password = "pa;ss#word"
tenant-name = demo
domain-name = Default
region = RegionTwo
os-endpoint-type = internal
tls-insecure = yes

[LoadBalancer]
subnet-id = 11111111-2222-3333-4444-555555555555
floating-network-id = ext
lb-provider = ovn
lb-method = SOURCE_IP_PORT
create-monitor
monitor-delay = 1m30s
monitor-timeout = 2500ms
monitor-max-retries = 4
internal-lb = off
max-shared-lb = 5
use-octavia = true

[LoadBalancerClass "gold"]
floating-network-id = gold-net
subnet-id = gold-subnet

[LoadBalancerClass "Silver"]
member-subnet-id = silver-members

[Networking]
public-network-name = pub1
public-network-name = pub2
internal-network-name = priv
ipv6-support-disabled = true
address-sort-order = 192.168.0.0/16, 10.0.0.0/8

[Route]
router-id = r1

[Metadata]
search-order = metadataService
request-timeout = 2m

[BlockStorage]
bs-version = v2
""",
    )

    settings = load_settings(path, environ={})

    g = settings.global_
    assert (g.auth_url, g.username, g.password) == (
        "http://keystone:5000/v3",
        "admin",
        "pa;ss#word",
    )
    assert (g.tenant_name, g.domain_name, g.region) == ("demo", "Default", "RegionTwo")
    assert g.interface == "internal"
    assert g.tls_insecure is True
    lb = settings.load_balancer
    assert lb.lb_provider == "ovn"
    assert lb.lb_method == "SOURCE_IP_PORT"
    assert lb.create_monitor is True
    assert (lb.monitor_delay, lb.monitor_timeout, lb.monitor_max_retries) == (90, 2, 4)
    assert lb.monitor_max_retries_down == 3
    assert lb.internal_lb is False
    assert lb.max_shared_lb == 5
    assert lb.cascade_delete is True
    assert lb.classes["gold"].floating_network_id == "gold-net"
    assert lb.classes["gold"].subnet_id == "gold-subnet"
    assert lb.classes["Silver"].member_subnet_id == "silver-members"
    net = settings.networking
    assert net.public_network_names == ("pub1", "pub2")
    assert net.internal_network_names == ("priv",)
    assert net.ipv6_support_disabled is True
    assert net.address_sort_order == (
        ipaddress.ip_network("192.168.0.0/16"),
        ipaddress.ip_network("10.0.0.0/8"),
    )
    assert settings.route.router_id == "r1"
    assert settings.metadata.search_order == ("metadataService",)
    assert settings.metadata.request_timeout == 120.0


def test_defaults_are_upstream_defaults(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, MINIMAL), environ={})

    lb = settings.load_balancer
    assert lb.enabled is True
    assert lb.lb_method == "ROUND_ROBIN"
    assert lb.lb_provider == "amphora"
    assert (lb.monitor_delay, lb.monitor_timeout) == (5, 3)
    assert (lb.monitor_max_retries, lb.monitor_max_retries_down) == (1, 3)
    assert lb.ingress_hostname_suffix == "nip.io"
    assert lb.container_store == "barbican"
    assert lb.max_shared_lb == 2
    assert settings.global_.interface == "public"
    assert settings.metadata.request_timeout == 60.0
    assert settings.metadata.search_order == ("configDrive", "metadataService")
    assert settings.regional is False


def test_os_ccm_regional_switches_provider_ids_to_the_regional_form(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, MINIMAL), environ={"OS_CCM_REGIONAL": "true"})

    assert settings.regional is True


def test_a_blank_multi_valued_key_resets_the_list(tmp_path: Path) -> None:
    text = (
        MINIMAL
        + "[Networking]\npublic-network-name = a\npublic-network-name =\npublic-network-name = b\n"
    )

    settings = load_settings(write(tmp_path, text), environ={})

    assert settings.networking.public_network_names == ("b",)


def test_a_repeated_section_merges_and_the_last_single_value_wins(tmp_path: Path) -> None:
    text = (
        MINIMAL + "[LoadBalancer]\nlb-method = A\n[loadbalancer]\nLB-METHOD = LEAST_CONNECTIONS\n"
    )

    settings = load_settings(write(tmp_path, text), environ={})

    assert settings.load_balancer.lb_method == "LEAST_CONNECTIONS"


def test_quoted_values_keep_spaces_and_escapes_and_lines_continue(tmp_path: Path) -> None:
    text = (
        MINIMAL
        + '[LoadBalancer]\nnode-selector = " a=b , c " \\\n  ; x\ningress-hostname-suffix = x\\"y\n'
    )

    settings = load_settings(write(tmp_path, text), environ={})

    assert settings.load_balancer.node_selector == " a=b , c "
    assert settings.load_balancer.ingress_hostname_suffix == 'x"y'


def test_the_settings_repr_never_shows_a_password(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, MINIMAL), environ={})

    assert "s3cret" not in repr(settings)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0", 0.0), ("5s", 5.0), ("1m30s", 90.0), ("1.5h", 5400.0), ("250ms", 0.25), ("-2s", -2.0)],
)
def test_durations_follow_go_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["5", "", "s", "5 s", "1d", "1m30"])
def test_durations_without_a_unit_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


def test_clouds_yaml_fills_empty_global_values_and_cloud_conf_wins(tmp_path: Path) -> None:
    clouds = tmp_path / "clouds.yaml"
    clouds.write_text(
        """\
clouds:
  mine:
    region_name: RegionFromYaml
    interface: internal
    auth:
      auth_url: http://yaml:5000/v3
      username: yaml-user
      password: yaml-secret
      project_name: yaml-project
      user_domain_name: Default
"""
    )
    text = (
        f"[Global]\nuse-clouds = true\nclouds-file = {clouds}\ncloud = mine\nusername = conf-user\n"
    )

    settings = load_settings(write(tmp_path, text), environ={})

    g = settings.global_
    assert g.username == "conf-user"
    assert g.auth_url == "http://yaml:5000/v3"
    assert g.password == "yaml-secret"
    assert g.tenant_name == "yaml-project"
    assert g.user_domain_name == "Default"
    assert g.region == "RegionFromYaml"
    assert g.interface == "internal"
