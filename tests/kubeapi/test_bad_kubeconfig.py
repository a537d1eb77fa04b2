"""A kubeconfig pyccm cannot use is one line saying which file and field, never the token,
password or key it holds, and the commands exit 2 on it. kubectl refuses the same ones
(where it installed), for the same reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pyccm.kubeapi.client import KubeClient, KubeSettings
from pyccm.kubeapi.errors import KubeConfigError
from tests.support.certificates import client_ca, issue_client
from tests.support.cli import pyccm
from tests.support.kubeconfigs import HAVE_KUBECTL, b64, kubectl_refuses, write_kubeconfig

SECRET = "s3cr3t-do-not-print-7f6e5d"
SERVER = {"server": "https://127.0.0.1:6443"}
V1 = "client.authentication.k8s.io/v1"
CA_PEM = b"-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n"


def _document(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _config(**user: Any) -> Any:
    return lambda path: write_kubeconfig(path, cluster=SERVER, user={"token": SECRET, **user})


def _cluster(**cluster: Any) -> Any:
    return lambda path: write_kubeconfig(path, cluster=cluster, user={"token": SECRET})


def _mismatched_pair(path: Path) -> Path:
    ca = client_ca(path.parent)
    cert, _ = issue_client(path.parent, ca, "one")
    _, key = issue_client(path.parent, ca, "two")
    user = {"client-certificate": str(cert), "client-key": str(key)}
    return write_kubeconfig(path, cluster=SERVER, user=user)


# (id, writes the kubeconfig, what the message says, whether kubectl refuses it too)
CASES: list[tuple[str, Any, str, bool]] = [
    ("missing", lambda path: path, "cannot read it: No such file or directory", True),
    (
        "not-yaml",
        lambda path: _document(path, f"users: [{{name: u, user: {{token: {SECRET}\n"),
        "not valid YAML (line",
        True,
    ),
    (
        "no-current-context",
        lambda path: _document(path, "clusters: []\n"),
        "no current-context",
        True,
    ),
    (
        "unknown-context",
        lambda path: _document(
            path, f"current-context: gone\nusers: [{{name: u, user: {{token: {SECRET}}}}}]\n"
        ),
        "context 'gone' is not defined",
        True,
    ),
    ("no-server", _cluster(), "cluster 'sim' has no server", True),
    (
        "token-and-password",
        _config(username="u", password=SECRET),
        "more than one authentication method",
        True,
    ),
    (
        "ca-file-and-data",
        _cluster(
            **SERVER,
            **{"certificate-authority": "ca.crt", "certificate-authority-data": b64(CA_PEM)},
        ),
        "certificate-authority-data and certificate-authority are both given",
        True,
    ),
    (
        "insecure-with-ca",
        _cluster(
            **SERVER,
            **{"insecure-skip-tls-verify": True, "certificate-authority-data": b64(CA_PEM)},
        ),
        "with insecure-skip-tls-verify is not allowed",
        True,
    ),
    (
        "ca-not-pem",
        _cluster(**SERVER, **{"certificate-authority-data": b64(CA_PEM)}),
        "holds no PEM certificate",
        True,
    ),
    (
        "certificate-without-key",
        _config(**{"client-certificate-data": b64(b"x")}),
        "a client certificate without its key",
        True,
    ),
    (
        "key-not-base64",
        _config(**{"client-certificate-data": b64(b"x"), "client-key-data": SECRET + "!"}),
        "client-key-data is not base64",
        True,
    ),
    ("mismatched-certificate-and-key", _mismatched_pair, "do not load together", True),
    (
        "exec-v1-without-interactive-mode",
        lambda path: write_kubeconfig(
            path,
            cluster=SERVER,
            user={
                "exec": {"apiVersion": V1, "command": "x", "env": [{"name": "T", "value": SECRET}]}
            },
        ),
        "interactiveMode must be given",
        True,
    ),
    (
        "auth-provider",
        lambda path: write_kubeconfig(
            path,
            cluster=SERVER,
            user={"auth-provider": {"name": "oidc", "config": {"id-token": SECRET}}},
        ),
        "auth-provider is not supported",
        False,
    ),
    ("impersonation", _config(**{"as": "admin"}), "impersonation", False),
    (
        "server-not-a-url",
        _cluster(server="https://[::1:6443"),
        "server https://[::1:6443 is not a URL (Invalid IPv6 URL)",
        True,
    ),
    (
        "proxy-url-scheme",
        _cluster(**SERVER, **{"proxy-url": f"ftp://ccm:{SECRET}@proxy:21"}),
        "proxy-url: unsupported scheme 'ftp', must be http, https, or socks5",
        True,
    ),
    (
        "proxy-url-socks5",
        _cluster(**SERVER, **{"proxy-url": f"socks5://ccm:{SECRET}@proxy:1080"}),
        "proxy-url: socks5 proxies are not supported (http and https are)",
        False,
    ),
    (
        "proxy-url-without-host",
        _cluster(**SERVER, **{"proxy-url": f"http://ccm:{SECRET}@:3128"}),
        "proxy-url is not a proxy URL",
        False,
    ),
    ("wrong-type", _config(token=[SECRET]), "Expected `str`, got `array`", False),
]
IDS = [case[0] for case in CASES]


@pytest.mark.parametrize(("name", "write", "says", "kubectl_too"), CASES, ids=IDS)
def test_an_unusable_kubeconfig_is_one_line_without_its_secret(
    tmp_path: Path, name: str, write: Any, says: str, kubectl_too: bool
) -> None:
    path = write(tmp_path / "config")
    with pytest.raises(KubeConfigError) as raised:
        KubeClient(settings=KubeSettings(kubeconfig=str(path)))
    message = str(raised.value)
    assert message.startswith(f"kubeconfig {path}: ")
    assert says in message
    assert "\n" not in message
    assert SECRET not in message
    assert SECRET not in repr(raised.value.__cause__ or "")


@pytest.mark.kubectl
@pytest.mark.skipif(not HAVE_KUBECTL, reason="kubectl is not installed")
@pytest.mark.parametrize(
    ("name", "write"), [(c[0], c[1]) for c in CASES if c[3]], ids=[c[0] for c in CASES if c[3]]
)
def test_kubectl_refuses_them_too(tmp_path: Path, name: str, write: Any) -> None:
    kubectl_refuses(write(tmp_path / "config"))


COMMANDS = [
    ("manager", ["manager"]),
    ("gc", ["gc", "--cloud-provider", "fake"]),
    ("plan", ["plan", "service", "default/web", "--cloud-provider", "fake"]),
    ("worker", ["worker", "cloud-node", "--standalone", "--cloud-provider", "fake"]),
]


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[c[0] for c in COMMANDS])
def test_every_command_exits_2_with_one_line(tmp_path: Path, name: str, command: list[str]) -> None:
    path = _config(username="u", password=SECRET)(tmp_path / "config")
    ran = pyccm(*command, "--kubeconfig", path, timeout=60)
    assert ran.code == 2, ran.stderr
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1, ran.stderr
    assert lines[0].startswith(f"pyccm {name}")
    assert f"kubeconfig {path}: user 'someone': more than one authentication method" in lines[0]
    assert SECRET not in ran.stderr + ran.stdout
