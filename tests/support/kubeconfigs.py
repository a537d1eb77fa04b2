"""Kubeconfigs as operators write them, and the kube simulator set up to check every way
they authenticate: bearer tokens, client certificates its client CA signed, basic auth
(tests/kubeapi). The simulator's request log says who each request was."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pyccm import lifetime
from pyccm.kubeapi.client import KubeClient, KubeSettings
from pyccm_sim.kube.settings import User
from pyccm_sim.kube.testing import KubeSimHandle, running_kube_sim
from tests.support.certificates import client_ca, issue_client

TOKEN_USER = "token-user"
TOKEN = "token-0a1b2c3d4e5f"
PASSWORD_USER = "password-user"
PASSWORD = "password-9f8e7d6c"
CERT_USER = "cert-user"
CERT_GROUP = "cert-group"


@dataclass(frozen=True)
class Authenticating:
    """A TLS simulator that knows TOKEN, PASSWORD and client certificates from `ca`."""

    kube: KubeSimHandle
    # (certificate, key) of the CA the simulator trusts for client certificates.
    ca: tuple[Path, Path]
    # A client certificate for CERT_USER in CERT_GROUP, and its key.
    client: tuple[Path, Path]

    @property
    def port(self) -> int:
        return int(self.kube.url.rsplit(":", 1)[1])

    def server_ca(self) -> bytes:
        assert self.kube.ca_file is not None
        return self.kube.ca_file.read_bytes()


@contextmanager
def authenticating_sim(directory: Path, **knobs: Any) -> Iterator[Authenticating]:
    directory.mkdir(parents=True, exist_ok=True)
    ca = client_ca(directory)
    client = issue_client(directory, ca, CERT_USER, CERT_GROUP)
    with running_kube_sim(
        tls=True,
        client_ca_file=ca[0],
        tokens=((TOKEN, User(TOKEN_USER)),),
        passwords=((PASSWORD_USER, PASSWORD, User(PASSWORD_USER)),),
        **knobs,
    ) as kube:
        yield Authenticating(kube=kube, ca=ca, client=client)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write_kubeconfig(
    path: Path, *, cluster: dict[str, Any], user: dict[str, Any] | None = None
) -> Path:
    """One cluster, one user, one context, current."""
    context: dict[str, str] = {"cluster": "sim"}
    users = []
    if user is not None:
        context["user"] = "someone"
        users = [{"name": "someone", "user": user}]
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "sim", "cluster": cluster}],
        "users": users,
        "contexts": [{"name": "here", "context": context}],
        "current-context": "here",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def who_reads(kubeconfig: Path, kube: KubeSimHandle, **settings: Any) -> str:
    """The user the simulator saw for one GET through pyccm's client with `kubeconfig`."""
    client = KubeClient(settings=KubeSettings(kubeconfig=str(kubeconfig), **settings))
    try:
        return who_is(client, kube)
    finally:
        client.close()


def who_is(client: KubeClient, kube: KubeSimHandle) -> str:
    """The user the simulator saw for one GET through `client`."""
    client.request("GET", "/api/v1/namespaces/kube-system")
    return last_user(kube)


def last_user(kube: KubeSimHandle) -> str:
    user: str = kube.requests()[-1]["user"]
    return user


def kubectl_reads(kubeconfig: Path, kube: KubeSimHandle) -> str:
    """The user the simulator saw for kubectl's GET with the same kubeconfig."""
    done = subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            str(kubeconfig),
            "get",
            "--raw",
            "/api/v1/namespaces/kube-system",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"},
        **lifetime.tied(),
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["metadata"]["name"] == "kube-system"
    return last_user(kube)


def kubectl_refuses(kubeconfig: Path) -> str:
    """kubectl's error for a kubeconfig it will not use (it stops before any request)."""
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "get", "--raw", "/version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        **lifetime.tied(),
    )
    assert done.returncode != 0, done.stdout
    return str(done.stderr)


HAVE_KUBECTL = shutil.which("kubectl") is not None
