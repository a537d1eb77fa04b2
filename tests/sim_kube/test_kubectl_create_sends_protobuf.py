"""kubectl's imperative `create` commands send protobuf bodies; the simulator decodes them
(sim/pyccm_sim/kube/protobuf.py) and answers JSON, which kubectl accepts (it asks for
`application/vnd.kubernetes.protobuf,application/json`).

Each command is also run as `--dry-run=client -o json | kubectl create -f -` (JSON) on a
second simulator: both must store the same object. Kinds it does not decode get 415.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from pyccm_sim.kube import protobuf
from pyccm_sim.kube.testing import KubeSimHandle, running_kube_sim

pytestmark = pytest.mark.kubectl
needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl")

PROTOBUF = "application/vnd.kubernetes.protobuf"
# (command after `kubectl create`, resource to get, name)
COMMANDS = [
    (["secret", "generic", "creds", "--from-literal=a=b", "--from-literal=token=s3cr3t"], "secret"),
    (
        [
            *("secret", "docker-registry", "pull", "--docker-server=r.example"),
            *("--docker-username=u", "--docker-password=p"),
        ],
        "secret",
    ),
    (["configmap", "settings", "--from-literal=k=v", "--from-literal=empty="], "configmap"),
    (["serviceaccount", "robot"], "serviceaccount"),
    (["namespace", "team-x"], "namespace"),
    (["service", "clusterip", "web", "--tcp=80:8080", "--tcp=443:web-tls"], "service"),
    (["service", "nodeport", "np", "--tcp=80:80", "--node-port=30080"], "service"),
    (["deployment", "dep", "--image=nginx", "--replicas=0", "--port=80"], "deployment"),
    (["role", "reader", "--verb=get", "--verb=list", "--resource=pods,secrets"], "role"),
    (["rolebinding", "rb", "--role=reader", "--serviceaccount=default:robot"], "rolebinding"),
    (["clusterrole", "nodes", "--verb=get", "--resource=nodes"], "clusterrole"),
    (["clusterrolebinding", "crb", "--clusterrole=nodes", "--user=bob"], "clusterrolebinding"),
    (["poddisruptionbudget", "pdb", "--selector=app=web", "--min-available=50%"], "pdb"),
]


@pytest.fixture
def tls_pair() -> Iterator[tuple[KubeSimHandle, KubeSimHandle]]:
    with running_kube_sim(tls=True) as first, running_kube_sim(tls=True) as second:
        yield first, second


def run_kubectl(kube: KubeSimHandle, *args: str, stdin: str | None = None) -> str:
    result = subprocess.run(
        ["kubectl", "--kubeconfig", str(kube.kubeconfig_path), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def stored(kube: KubeSimHandle, resource: str, name: str) -> Any:
    obj = json.loads(run_kubectl(kube, "get", resource, name, "-o", "json"))
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
        obj["metadata"].pop(key, None)
    return obj


@needs_kubectl
def test_kubectl_create_stores_what_the_same_object_in_json_stores(
    tls_pair: tuple[KubeSimHandle, KubeSimHandle],
) -> None:
    by_protobuf, by_json = tls_pair
    mark = len(by_protobuf.requests())

    for command, _ in COMMANDS:
        assert run_kubectl(by_protobuf, "create", *command).strip().endswith("created")
        manifest = run_kubectl(by_json, "create", *command, "--dry-run=client", "-o", "json")
        run_kubectl(by_json, "create", "-f", "-", stdin=manifest)

    posts = [r for r in by_protobuf.requests()[mark:] if r.get("verb") == "create"]
    assert [r["contentType"] for r in posts] == [PROTOBUF] * len(COMMANDS)
    for command, resource in COMMANDS:
        name = command[2] if command[0] in {"secret", "service"} else command[1]
        assert stored(by_protobuf, resource, name) == stored(by_json, resource, name), command


@needs_kubectl
def test_kubectl_get_shows_the_data_kubectl_create_sent(
    tls_pair: tuple[KubeSimHandle, KubeSimHandle],
) -> None:
    kube, _ = tls_pair
    run_kubectl(kube, "create", "secret", "generic", "x", "--from-literal=a=b")
    run_kubectl(kube, "create", "configmap", "c", "--from-literal=k=v")
    run_kubectl(kube, "create", "serviceaccount", "sa")
    run_kubectl(kube, "create", "namespace", "n")
    run_kubectl(kube, "create", "deployment", "d", "--image=nginx", "--replicas=0")

    secret = json.loads(run_kubectl(kube, "get", "secret", "x", "-o", "json"))
    configmap = json.loads(run_kubectl(kube, "get", "configmap", "c", "-o", "json"))
    account = json.loads(run_kubectl(kube, "get", "serviceaccount", "sa", "-o", "json"))
    namespace = json.loads(run_kubectl(kube, "get", "namespace", "n", "-o", "json"))
    deployment = json.loads(run_kubectl(kube, "get", "deployment", "d", "-o", "json"))

    assert (secret["type"], secret["data"]) == ("Opaque", {"a": "Yg=="})
    assert configmap["data"] == {"k": "v"}
    assert (account["metadata"]["name"], account["metadata"]["namespace"]) == ("sa", "default")
    assert namespace["status"] == {"phase": "Active"}
    # A pointer field's zero is sent, and kept: replicas 0 is not "unset".
    assert deployment["spec"]["replicas"] == 0


def post(kube: KubeSimHandle, path: str, body: bytes) -> tuple[int, Any]:
    request = urllib.request.Request(
        kube.url + path,
        data=body,
        method="POST",
        headers={"Content-Type": PROTOBUF, "Authorization": f"Bearer {kube.token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = protobuf.field_bytes(1, api_version.encode()) + protobuf.field_bytes(
        2, kind.encode()
    )
    return protobuf.MAGIC + protobuf.field_bytes(1, type_meta) + protobuf.field_bytes(2, raw)


def named(name: str) -> bytes:
    """An object's message with `metadata {name}` only."""
    return protobuf.field_bytes(1, protobuf.field_bytes(1, name.encode()))


@pytest.fixture
def kube() -> Iterator[KubeSimHandle]:
    with running_kube_sim() as handle:
        yield handle


def test_a_kind_the_simulator_does_not_decode_is_415(kube: KubeSimHandle) -> None:
    status, answer = post(
        kube,
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        envelope("coordination.k8s.io/v1", "Lease", named("l")),
    )

    assert status == 415
    assert answer["reason"] == "UnsupportedMediaType"
    assert answer["message"].startswith(
        f"the body of the request was in an unknown format ({PROTOBUF}) - accepted media "
        "types include: application/json, application/yaml"
    )
    assert "Lease" in answer["message"]
    assert kube.list_objects("leases", "default") == []


def test_a_field_the_simulator_does_not_decode_is_415_not_dropped(kube: KubeSimHandle) -> None:
    unknown = protobuf.varint_bytes(9 << 3) + protobuf.varint_bytes(1)
    status, answer = post(
        kube,
        "/api/v1/namespaces/default/secrets",
        envelope("v1", "Secret", named("s") + unknown),
    )

    assert status == 415
    assert "field 9 of Secret" in answer["message"]


def test_bytes_that_are_not_a_protobuf_object_are_400(kube: KubeSimHandle) -> None:
    truncated = envelope("v1", "Secret", named("s"))[:-3]

    for body in (b'{"kind": "Secret"}', truncated):
        status, answer = post(kube, "/api/v1/namespaces/default/secrets", body)
        assert (status, answer["reason"]) == (400, "BadRequest"), body
