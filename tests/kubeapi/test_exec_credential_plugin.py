"""A kubeconfig's exec credential plugin (client.authentication.k8s.io v1 and v1beta1): run
on the first request with its args, env and KUBERNETES_EXEC_INFO, kept until its
expirationTimestamp, run again after it and after a 401; its token or client certificate
is who we are. The plugin is a small script that counts its runs and hands out the next
credential of a list each time; kubectl runs the same kubeconfig."""

from __future__ import annotations

import datetime
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyccm.kubeapi.client import KubeClient, KubeSettings
from tests.support.kubeconfigs import (
    CERT_USER,
    HAVE_KUBECTL,
    Authenticating,
    authenticating_sim,
    b64,
    kubectl_reads,
    who_is,
    write_kubeconfig,
)
from tests.support.proxy import connect_proxy

PLUGIN = """\
import datetime, json, os, sys
state = sys.argv[1]
runs = len(os.listdir(state)) + 1
with open(os.path.join(state, f"run-{runs}.json"), "w") as record:
    json.dump({"info": json.loads(os.environ["KUBERNETES_EXEC_INFO"]),
               "mode": os.environ["PLUGIN_MODE"]}, record)
status = {}
if os.environ["PLUGIN_MODE"] == "certificate":
    status["clientCertificateData"] = open(os.environ["PLUGIN_CERT"]).read()
    status["clientKeyData"] = open(os.environ["PLUGIN_KEY"]).read()
else:
    status["token"] = f"exec-token-{runs}"
lifetime = float(os.environ["PLUGIN_LIFETIME"])
if lifetime:
    until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=lifetime)
    status["expirationTimestamp"] = until.strftime("%Y-%m-%dT%H:%M:%SZ")
print(json.dumps({"apiVersion": os.environ["PLUGIN_VERSION"], "kind": "ExecCredential",
                  "status": status}))
"""
V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[Authenticating]:
    with authenticating_sim(tmp_path / "pki") as sim:
        for run in range(1, 6):
            sim.kube.add_token(f"exec-token-{run}", f"exec-user-{run}")
        yield sim


def plugin_kubeconfig(
    sim: Authenticating,
    directory: Path,
    *,
    version: str = V1,
    lifetime: float = 0,
    proxy_url: str = "",
    **env: str,
) -> tuple[Path, Path]:
    """The kubeconfig, and the directory where each run of its plugin leaves a record."""
    state = directory / "runs"
    state.mkdir(parents=True)
    (directory / "bin").mkdir()
    script = directory / "bin" / "plugin"
    script.write_text(f"#!{sys.executable}\n{PLUGIN}")
    script.chmod(0o755)
    variables = {
        "PLUGIN_MODE": "token",
        "PLUGIN_LIFETIME": str(lifetime),
        "PLUGIN_VERSION": version,
        **env,
    }
    exec_config: dict[str, Any] = {
        "apiVersion": version,
        # Relative, with a /: the kubeconfig's directory's, as client-go resolves it.
        "command": "./bin/plugin",
        "args": [str(state)],
        "env": [{"name": k, "value": v} for k, v in variables.items()],
        "provideClusterInfo": True,
    }
    if version == V1:
        exec_config["interactiveMode"] = "IfAvailable"
    cluster = {"server": sim.kube.url, "certificate-authority-data": b64(sim.server_ca())}
    if proxy_url:
        cluster["proxy-url"] = proxy_url
    kubeconfig = write_kubeconfig(directory / "config", cluster=cluster, user={"exec": exec_config})
    return kubeconfig, state


def runs(state: Path) -> list[dict[str, Any]]:
    records = sorted(state.iterdir(), key=lambda p: int(p.stem.split("-")[1]))
    return [json.loads(p.read_text()) for p in records]


def client_for(kubeconfig: Path) -> KubeClient:
    return KubeClient(settings=KubeSettings(kubeconfig=str(kubeconfig)))


def test_the_plugin_runs_once_until_its_credential_expires_then_again(
    sim: Authenticating, tmp_path: Path
) -> None:
    kubeconfig, state = plugin_kubeconfig(sim, tmp_path / "kube", lifetime=2)
    client = client_for(kubeconfig)
    try:
        assert runs(state) == []  # nothing runs before the first request
        assert who_is(client, sim.kube) == "exec-user-1"
        assert who_is(client, sim.kube) == "exec-user-1"
        assert len(runs(state)) == 1
        first = runs(state)[0]["info"]
        assert first["apiVersion"] == V1
        assert first["kind"] == "ExecCredential"
        assert first["spec"]["interactive"] is False
        assert first["spec"]["cluster"]["server"] == sim.kube.url
        assert first["spec"]["cluster"]["certificate-authority-data"] == b64(sim.server_ca())
        # Past the expirationTimestamp (whole seconds, so up to 3 s from the run).
        expiry = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=3)
        while datetime.datetime.now(datetime.UTC) < expiry:
            time.sleep(0.1)
        assert who_is(client, sim.kube) == "exec-user-2"
        assert len(runs(state)) == 2
    finally:
        client.close()


def test_a_401_runs_the_plugin_again_and_the_request_goes_once_more(
    sim: Authenticating, tmp_path: Path
) -> None:
    kubeconfig, state = plugin_kubeconfig(sim, tmp_path / "kube", version=V1BETA1)
    client = client_for(kubeconfig)
    try:
        assert who_is(client, sim.kube) == "exec-user-1"
        # Revoked before its (absent) expiry: the server now refuses it.
        sim.kube.call(lambda kube: kube.tokens.pop("exec-token-1"))
        mark = len(sim.kube.requests())
        assert who_is(client, sim.kube) == "exec-user-2"
        answered = [(r["code"], r["user"]) for r in sim.kube.requests()[mark:]]
        assert answered == [(401, ""), (200, "exec-user-2")]
        assert len(runs(state)) == 2
    finally:
        client.close()


def test_a_client_certificate_from_the_plugin_is_who_we_are(
    sim: Authenticating, tmp_path: Path
) -> None:
    cert, key = sim.client
    kubeconfig, state = plugin_kubeconfig(
        sim,
        tmp_path / "kube",
        version=V1BETA1,
        PLUGIN_MODE="certificate",
        PLUGIN_CERT=str(cert),
        PLUGIN_KEY=str(key),
    )
    client = client_for(kubeconfig)
    try:
        assert who_is(client, sim.kube) == CERT_USER
        assert [r["mode"] for r in runs(state)] == ["certificate"]
    finally:
        client.close()


@pytest.mark.kubectl
@pytest.mark.skipif(not HAVE_KUBECTL, reason="kubectl is not installed")
@pytest.mark.parametrize("version", [V1, V1BETA1])
def test_kubectl_runs_the_same_plugin_and_is_the_same_user(
    sim: Authenticating, tmp_path: Path, version: str
) -> None:
    kubeconfig, state = plugin_kubeconfig(sim, tmp_path / "kube", version=version)
    assert kubectl_reads(kubeconfig, sim.kube) == "exec-user-1"
    client = client_for(kubeconfig)
    try:
        assert who_is(client, sim.kube) == "exec-user-2"
    finally:
        client.close()
    ours, theirs = runs(state)[1]["info"], runs(state)[0]["info"]
    assert ours["spec"]["cluster"] == theirs["spec"]["cluster"]
    assert ours["apiVersion"] == theirs["apiVersion"] == version


@pytest.mark.kubectl
@pytest.mark.skipif(not HAVE_KUBECTL, reason="kubectl is not installed")
def test_the_plugin_is_told_the_proxy_url_as_kubectl_tells_it(
    sim: Authenticating, tmp_path: Path
) -> None:
    with connect_proxy() as proxy:
        url = proxy.url.replace("http://", "http://ccm:pr0xy@")
        kubeconfig, state = plugin_kubeconfig(sim, tmp_path / "kube", proxy_url=url)
        assert kubectl_reads(kubeconfig, sim.kube) == "exec-user-1"
        client = client_for(kubeconfig)
        try:
            assert who_is(client, sim.kube) == "exec-user-2"
        finally:
            client.close()
        assert {c.credentials for c in proxy.connects()} == {"ccm:pr0xy"}
    ours, theirs = runs(state)[1]["info"], runs(state)[0]["info"]
    assert theirs["spec"]["cluster"]["proxy-url"] == url
    assert ours["spec"]["cluster"] == theirs["spec"]["cluster"]
