"""A bad `cloud.conf` is one line naming file, section and key, and never shows a secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyccm.provider.errors import ConfigError
from pyccm.provider.openstack.config import load_settings

MINIMAL = "[Global]\nauth-url = http://127.0.0.1:5000/v3\nusername = admin\npassword = s3cret\n"


def error_for(tmp_path: Path, text: str) -> str:
    path = tmp_path / "cloud.conf"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={})
    message = str(caught.value)
    assert "\n" not in message
    assert "s3cret" not in message
    assert message.startswith(str(path))
    return message


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cloud\.conf: cloud config file does not exist"):
        load_settings(tmp_path / "cloud.conf", environ={})


def test_no_cloud_config_at_all_is_an_error() -> None:
    with pytest.raises(ConfigError, match="needs --cloud-config"):
        load_settings(None, environ={})


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            "[LoadBalancer]\nlb-provider = octavia-nope\n",
            ":6: [LoadBalancer] lb-provider: unknown provider",
        ),
        (
            "[LoadBalancer]\nmonitor-delay = 5\n",
            ":6: [LoadBalancer] monitor-delay: invalid duration (value hidden)",
        ),
        ("[Metadata]\nrequest-timeout = soon\n", "[Metadata] request-timeout: invalid duration"),
        (
            "[Networking]\naddress-sort-order = 10.0.0.0/8, 10.0.0.300/24\n",
            "[Networking] address-sort-order: (value hidden) is not a CIDR",
        ),
        (
            "[LoadBalancer]\nlb-version = v1\n",
            "[LoadBalancer] lb-version: (value hidden) is not supported",
        ),
        (
            "[LoadBalancer]\ninternal-lb = maybe\n",
            "[LoadBalancer] internal-lb: (value hidden) is not a boolean",
        ),
        (
            "[LoadBalancer]\nmax-shared-lb = two\n",
            "[LoadBalancer] max-shared-lb: (value hidden) is not an integer",
        ),
        ("[Metadata]\nsearch-order = configDrive, cloudInit\n", "[Metadata] search-order:"),
        ("[LoadBalancer]\ncontainer-store = vault\n", "[LoadBalancer] container-store:"),
        ("[LoadBalancer]\nsubnet-id\n", "[LoadBalancer] subnet-id: missing value"),
    ],
)
def test_an_invalid_value_names_file_section_and_key(
    tmp_path: Path, extra: str, expected: str
) -> None:
    assert expected in error_for(tmp_path, MINIMAL + extra)


@pytest.mark.parametrize(
    "text",
    [
        '[Global]\npassword = "s3cret\n',
        "[Global]\npassword = s3cret\\q\n",
        "[Global\npassword = s3cret\n",
        "password = s3cret\n",
        "[Global]\n= s3cret\n",
        "[Global]\npassword s3cret\n",
    ],
)
def test_a_syntax_error_never_quotes_the_line(tmp_path: Path, text: str) -> None:
    message = error_for(tmp_path, text)

    assert ":" in message


def test_without_an_auth_url_the_config_is_refused(tmp_path: Path) -> None:
    assert "[Global] auth-url: required" in error_for(tmp_path, "[Global]\nusername = a\n")


def test_an_unknown_clouds_yaml_cloud_is_named(tmp_path: Path) -> None:
    clouds = tmp_path / "clouds.yaml"
    clouds.write_text("clouds:\n  other:\n    auth:\n      auth_url: http://x/v3\n")
    text = f"[Global]\nuse-clouds = true\nclouds-file = {clouds}\ncloud = mine\n"

    assert "no cloud named (value hidden)" in error_for(tmp_path, text)


def test_a_secret_typed_into_the_wrong_key_is_not_quoted_at_start(tmp_path: Path) -> None:
    # Only the password keys used to be hidden: a password pasted one line too low (into a
    # boolean) reached the log with the value quoted.
    message = error_for(tmp_path, MINIMAL + "[LoadBalancer]\ncreate-monitor = Tr0ub4dor&3\n")

    assert "[LoadBalancer] create-monitor" in message
    assert "Tr0ub4dor" not in message


@pytest.mark.parametrize("url", ["https://[::1:5000/v3", "keystone:5000", "ftp://k/v3", "http://"])
def test_an_auth_url_that_is_not_an_http_url_with_a_host_is_one_line(
    tmp_path: Path, url: str
) -> None:
    error = error_for(tmp_path, f"[Global]\nauth-url = {url}\nuser-id = u\npassword = s3cret\n")

    assert "[Global] auth-url: not an http:// or https:// URL with a host" in error
    assert "s3cret" not in error
