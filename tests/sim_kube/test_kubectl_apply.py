"""kubectl's declarative verbs against the simulator, validation on (kubectl 1.32's default):
create, apply (client-side and server-side), diff, replace, get and delete of a manifest
holding every kind a deployment uses, each checked through kubectl's output and exit code
and through the simulator's store. Skipped without kubectl; TLS, because kubectl sends a
bearer token only over TLS. Each kubectl gets its own cache directory, so no discovery or
OpenAPI document cached by one run answers for another."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from pyccm_sim.kube.settings import User
from pyccm_sim.kube.testing import KubeSimHandle, running_kube_sim

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]

SA_TOKEN = "demo-app-token"
SA_USER = "system:serviceaccount:demo:app"

NAMESPACE = """\
apiVersion: v1
kind: Namespace
metadata: {name: demo}
"""
RBAC = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: demo-node-reader}
rules:
- {apiGroups: [""], resources: [nodes], verbs: [get, list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: demo-node-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: demo-node-reader}
subjects:
- {kind: ServiceAccount, name: app, namespace: demo}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: config-reader, namespace: demo}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get, list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: config-reader, namespace: demo}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: config-reader}
subjects:
- {kind: ServiceAccount, name: app, namespace: demo}
"""
WORKLOADS = """\
apiVersion: v1
kind: ServiceAccount
metadata: {name: app, namespace: demo}
---
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: demo}
stringData: {password: hunter2}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: demo}
data: {level: debug}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: demo}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      serviceAccountName: app
      containers:
      - name: web
        image: nginx:1.27
        ports: [{containerPort: 80}]
        env: [{name: LEVEL, value: debug}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: demo}
spec:
  serviceName: db
  replicas: 1
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
      - {name: db, image: "postgres:16"}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: demo}
spec:
  minAvailable: 1
  selector:
    matchLabels: {app: web}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: demo}
spec:
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: demo}
spec:
  clusterIP: None
  selector: {app: db}
  ports: [{port: 5432}]
"""
MANIFEST = "---\n".join((NAMESPACE, RBAC, WORKLOADS))
# (store resource name, namespace, name, how kubectl names the object), in manifest order.
OBJECTS = (
    ("namespaces", "", "demo", "namespace/demo"),
    (
        "clusterroles",
        "",
        "demo-node-reader",
        "clusterrole.rbac.authorization.k8s.io/demo-node-reader",
    ),
    (
        "clusterrolebindings",
        "",
        "demo-node-reader",
        "clusterrolebinding.rbac.authorization.k8s.io/demo-node-reader",
    ),
    ("roles", "demo", "config-reader", "role.rbac.authorization.k8s.io/config-reader"),
    (
        "rolebindings",
        "demo",
        "config-reader",
        "rolebinding.rbac.authorization.k8s.io/config-reader",
    ),
    ("serviceaccounts", "demo", "app", "serviceaccount/app"),
    ("secrets", "demo", "creds", "secret/creds"),
    ("configmaps", "demo", "settings", "configmap/settings"),
    ("deployments", "demo", "web", "deployment.apps/web"),
    ("statefulsets", "demo", "db", "statefulset.apps/db"),
    ("poddisruptionbudgets", "demo", "web", "poddisruptionbudget.policy/web"),
    ("services", "demo", "web", "service/web"),
    ("services", "demo", "db", "service/db"),
)
# kubectl's own three-way patch is never empty for these two, so a second `kubectl apply`
# says "configured" for them against any API server: a Secret's stringData is write-only
# (the live object never shows it), and a PodDisruptionBudget's selector has the patch
# strategy "replace" (the patch always carries it).
ALWAYS_RESENT = ("secret/creds", "poddisruptionbudget.policy/web")


@dataclass
class Kubectl:
    kube: KubeSimHandle
    kubeconfig: Path
    cache: Path

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", f"--kubeconfig={self.kubeconfig}", f"--cache-dir={self.cache}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def ok(self, *args: str, stdin: str | None = None) -> str:
        done = self.run(*args, stdin=stdin)
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout

    def as_user(self, token: str) -> Kubectl:
        config = yaml.safe_load(self.kubeconfig.read_text())
        config["users"][0]["user"]["token"] = token
        path = self.kubeconfig.with_name(f"kubeconfig-{token}")
        path.write_text(yaml.safe_dump(config))
        return Kubectl(self.kube, path, self.cache)


@pytest.fixture
def kubectl(tmp_path: Path) -> Iterator[Kubectl]:
    tokens = ((SA_TOKEN, User(SA_USER)),)
    with running_kube_sim(seed_nodes=2, tls=True, rbac=True, tokens=tokens) as kube:
        yield Kubectl(kube, kube.kubeconfig_path, tmp_path / "kubectl-cache")


def write(tmp_path: Path, text: str, name: str = "manifest.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def stored(kube: KubeSimHandle) -> dict[str, dict[str, Any] | None]:
    return {printed: kube.get(resource, name, ns) for resource, ns, name, printed in OBJECTS}


def live(kube: KubeSimHandle, resource: str, name: str, namespace: str = "demo") -> Any:
    obj = kube.get(resource, name, namespace)
    assert obj is not None, f"{resource}/{name} is not stored"
    return obj


def deleted(printed_name: str) -> str:
    """How `kubectl delete` reports an object: `deployment.apps "web" deleted`."""
    kind, _, name = printed_name.partition("/")
    return f'{kind} "{name}" deleted'


def printed(output: str, verb: str) -> list[str]:
    return [line.removesuffix(f" {verb}") for line in output.splitlines()]


def test_create_stores_every_kind_with_the_api_servers_metadata(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    manifest = write(tmp_path, MANIFEST)
    output = kubectl.ok("create", "-f", manifest)
    assert printed(output, "created") == [p for *_, p in OBJECTS]
    objects = stored(kubectl.kube)
    for name, obj in objects.items():
        assert obj is not None, name
        meta = obj["metadata"]
        assert all(meta.get(k) for k in ("uid", "resourceVersion", "creationTimestamp")), name
    deployment = live(kubectl.kube, "deployments", "web")
    assert (deployment["metadata"]["generation"], deployment["spec"]["replicas"]) == (1, 2)
    (manager,) = deployment["metadata"]["managedFields"]
    assert (manager["manager"], manager["operation"]) == ("kubectl-create", "Update")
    assert manager["fieldsV1"]["f:spec"]["f:replicas"] == {}
    assert live(kubectl.kube, "services", "db")["spec"]["clusterIP"] == "None"

    again = kubectl.run("create", "-f", manifest)
    assert again.returncode == 1
    assert 'Error from server (AlreadyExists): error when creating "' in again.stderr
    assert 'deployments.apps "web" already exists' in again.stderr


def test_a_second_apply_changes_nothing(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = write(tmp_path, MANIFEST)
    assert printed(kubectl.ok("apply", "-f", manifest), "created") == [p for *_, p in OBJECTS]
    deployment = live(kubectl.kube, "deployments", "web")
    assert (
        "kubectl.kubernetes.io/last-applied-configuration" in deployment["metadata"]["annotations"]
    )
    before = kubectl.kube.resource_version

    output = kubectl.ok("apply", "-f", manifest)

    assert output.splitlines() == [
        f"{p} configured" if p in ALWAYS_RESENT else f"{p} unchanged" for *_, p in OBJECTS
    ]
    # The patches kubectl re-sends change nothing, so nothing is written.
    assert kubectl.kube.resource_version == before


def test_server_side_apply_updates_in_place_and_refuses_another_managers_field(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    kubectl.ok("apply", "-f", write(tmp_path, MANIFEST))
    output = kubectl.ok("apply", "--server-side", "-f", write(tmp_path, MANIFEST))
    assert printed(output, "serverside-applied") == [p for *_, p in OBJECTS]
    deployment = live(kubectl.kube, "deployments", "web")
    owners = {(m["manager"], m["operation"]) for m in deployment["metadata"]["managedFields"]}
    assert ("kubectl", "Apply") in owners

    # The same manager applying a change updates the object (no conflict with itself).
    three = write(tmp_path, MANIFEST.replace("replicas: 2", "replicas: 3"), "three.yaml")
    assert "deployment.apps/web serverside-applied" in kubectl.ok(
        "apply", "--server-side", "-f", three
    )
    deployment = live(kubectl.kube, "deployments", "web")
    assert (deployment["spec"]["replicas"], deployment["metadata"]["generation"]) == (3, 2)

    # Another manager may not take a field kubectl owns with a different value...
    five = write(tmp_path, MANIFEST.replace("replicas: 2", "replicas: 5"), "five.yaml")
    refused = kubectl.run("apply", "--server-side", "--field-manager=other", "-f", five)
    assert refused.returncode == 1
    assert 'Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas' in (
        refused.stderr
    )
    assert live(kubectl.kube, "deployments", "web")["spec"]["replicas"] == 3
    # ...unless it forces the conflict, which moves the field to it.
    kubectl.ok("apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", five)
    deployment = live(kubectl.kube, "deployments", "web")
    assert deployment["spec"]["replicas"] == 5
    replicas_owners = [
        m["manager"]
        for m in deployment["metadata"]["managedFields"]
        if "f:replicas" in m["fieldsV1"].get("f:spec", {})
    ]
    assert replicas_owners == ["other"]


def test_diff_is_empty_when_equal_and_shows_a_change_without_storing_it(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    kubectl.ok("apply", "-f", write(tmp_path, MANIFEST))
    same = kubectl.run("diff", "-f", write(tmp_path, MANIFEST))
    assert (same.returncode, same.stdout) == (0, "")
    before = kubectl.kube.resource_version

    changed = write(tmp_path, MANIFEST.replace("nginx:1.27", "nginx:1.28"), "changed.yaml")
    diff = kubectl.run("diff", "-f", changed)

    assert diff.returncode == 1, diff.stderr
    lines = diff.stdout.splitlines()
    assert "-        image: nginx:1.27" in lines
    assert "+        image: nginx:1.28" in lines
    # The server computed the patched Deployment (dryRun=All) and stored nothing.
    deployment = live(kubectl.kube, "deployments", "web")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert kubectl.kube.resource_version == before


def test_replace_puts_the_file_back_and_get_reads_it(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl.ok("apply", "-f", write(tmp_path, MANIFEST))
    changed = write(tmp_path, MANIFEST.replace("nginx:1.27", "nginx:1.28"), "changed.yaml")

    output = kubectl.ok("replace", "-f", changed)

    assert printed(output, "replaced") == [p for *_, p in OBJECTS]
    deployment = live(kubectl.kube, "deployments", "web")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.28"
    # The file has no last-applied annotation, and replace puts the file back as it is.
    assert "annotations" not in deployment["metadata"]
    as_yaml = yaml.safe_load(kubectl.ok("get", "deployment", "web", "-n", "demo", "-o", "yaml"))
    as_json = json.loads(kubectl.ok("get", "deployment", "web", "-n", "demo", "-o", "json"))
    assert as_yaml == as_json
    assert as_json["spec"] == deployment["spec"]
    assert as_json["metadata"]["resourceVersion"] == deployment["metadata"]["resourceVersion"]
    listed = kubectl.ok("get", "services", "-n", "demo").splitlines()
    assert [line.split()[:3] for line in listed] == [
        ["NAME", "TYPE", "CLUSTER-IP"],
        ["db", "ClusterIP", "None"],
        ["web", "ClusterIP", live(kubectl.kube, "services", "web")["spec"]["clusterIP"]],
    ]


def test_delete_removes_every_object_the_namespace_listed_first(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    manifest = write(tmp_path, MANIFEST)
    kubectl.ok("apply", "-f", manifest)

    output = kubectl.ok("delete", "-f", manifest, "--timeout=30s")

    assert output.splitlines() == [deleted(p) for *_, p in OBJECTS]
    assert stored(kubectl.kube) == dict.fromkeys((p for *_, p in OBJECTS), None)


def test_a_secrets_string_data_reads_back_as_base64_data(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl.ok("apply", "-f", write(tmp_path, NAMESPACE + "---\n" + WORKLOADS))
    secret = live(kubectl.kube, "secrets", "creds")
    assert "stringData" not in secret
    assert (secret["type"], secret["data"]) == (
        "Opaque",
        {"password": base64.b64encode(b"hunter2").decode()},
    )
    read = kubectl.ok("get", "secret", "creds", "-n", "demo", "-o", "jsonpath={.data.password}")
    assert base64.b64decode(read) == b"hunter2"


UNKNOWN_FIELDS = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: typo, namespace: default}
spec:
  replica: 2
  selector:
    matchLabels: {app: typo}
  template:
    metadata:
      labels: {app: typo}
    spec:
      containers:
      - {name: typo, image: nginx, imagePullPolicyy: Always}
"""


def test_an_unknown_field_fails_validation_as_on_a_real_server(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    manifest = write(tmp_path, UNKNOWN_FIELDS)
    unknown = (
        'unknown field "spec.replica", '
        'unknown field "spec.template.spec.containers[0].imagePullPolicyy"'
    )
    for verb in ("create", "apply"):
        refused = kubectl.run(verb, "-f", manifest)
        assert refused.returncode == 1
        assert (
            "Error from server (BadRequest): error when creating "
            f'"{manifest}": Deployment in version "v1" cannot be handled as a Deployment: '
            f"strict decoding error: {unknown}"
        ) in refused.stderr
    server_side = kubectl.run("apply", "--server-side", "-f", manifest)
    assert server_side.returncode == 1
    assert ".spec.replica: field not declared in schema" in server_side.stderr
    assert kubectl.kube.get("deployments", "typo", "default") is None

    # Told to warn, the API server drops the unknown fields and says so.
    warned = kubectl.run("apply", "--validate=warn", "-f", manifest)
    assert warned.returncode == 0
    assert 'Warning: unknown field "spec.replica"' in warned.stderr
    deployment = live(kubectl.kube, "deployments", "typo", "default")
    assert "replica" not in deployment["spec"]
    assert "imagePullPolicyy" not in deployment["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "kind: Deployment",
            "kind: Deploymint",
            'no matches for kind "Deploymint" in version "apps/v1"',
        ),
        ("apps/v1", "apps/v2", 'no matches for kind "Deployment" in version "apps/v2"'),
    ],
)
def test_a_kind_the_server_does_not_serve_is_no_match(
    kubectl: Kubectl, tmp_path: Path, old: str, new: str, message: str
) -> None:
    manifest = write(tmp_path, UNKNOWN_FIELDS.replace(old, new))
    refused = kubectl.run("apply", "-f", manifest)
    assert refused.returncode == 1
    assert message in refused.stderr


def test_rbac_applied_with_kubectl_grants_the_service_account_its_role(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    app = kubectl.as_user(SA_TOKEN)
    kubectl.ok("apply", "-f", write(tmp_path, NAMESPACE + "---\n" + WORKLOADS))
    before = app.run("get", "configmaps", "-n", "demo")
    assert before.returncode == 1
    assert (
        'configmaps is forbidden: User "system:serviceaccount:demo:app" cannot list resource '
        '"configmaps" in API group "" in the namespace "demo"'
    ) in before.stderr

    rbac = write(tmp_path, RBAC, "rbac.yaml")
    kubectl.ok("apply", "-f", rbac)

    assert app.ok("get", "configmaps", "-n", "demo", "-o", "name").split() == ["configmap/settings"]
    assert [line.split()[0] for line in app.ok("get", "nodes").splitlines()[1:]] == [
        "node-0000",
        "node-0001",
    ]
    # The Role grants configmaps, not secrets, and only in its namespace.
    assert app.run("get", "secrets", "-n", "demo").returncode == 1
    assert app.run("get", "configmaps", "-n", "default").returncode == 1

    kubectl.ok("delete", "-f", rbac)
    assert app.run("get", "configmaps", "-n", "demo").returncode == 1
