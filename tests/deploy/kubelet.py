"""A kubelet in miniature: runs the pods of workloads read back from an API server as local
processes, with exactly their command lines and environment.

No container engine runs here, so this test machine stands in for a node, the image and the
cluster DNS, and says so in one place (`Host`):
- the image's paths (`/app/.venv`, `/app`) are this checkout and its virtual environment;
- every volume is materialized in a scratch directory (Secrets and ConfigMaps as the kubelet
  writes them, from the objects the API server holds; emptyDirs empty), and a path under a
  mountPath is rewritten to that directory wherever it appears in the command, args or env;
- each pod gets its own loopback address (127.0.0.2, 127.0.0.3, ...) as `status.podIP`;
- a Service is a forwarder on its own loopback address (127.0.1.N) to the selected pods
  that are alive (`ServiceProxy`, kube-proxy's part), and its DNS name
  (`NAME.NAMESPACE.svc`) is that address;
- the in-cluster ServiceAccount credentials (a fixed path in the kubernetes client) are the
  one thing a process cannot be pointed at by its command line: an empty `PYCCM_KUBECONFIG`
  (which means "in-cluster" in every pyccm manifest) becomes a kubeconfig holding the
  pod's ServiceAccount token.
Everything else (flags, env names, `$(VAR)` expansion, probes' paths, ports and schemes) is
taken from the objects as the API server returns them, so a renamed flag fails here.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import itertools
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyccm import lifetime

Obj = dict[str, Any]

VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


@dataclass
class Host:
    """What this machine stands in for; see the module docstring."""

    scratch: Path
    kubectl: list[str]  # the kubectl command with its --kubeconfig
    image_paths: Mapping[str, str]  # image path prefix -> local path
    service_account_kubeconfigs: Mapping[str, Path]  # "namespace/name" -> kubeconfig
    api_server: tuple[str, int]  # what the kubelet puts in KUBERNETES_SERVICE_HOST/PORT
    next_ip: int = 2
    dns: dict[str, str] = field(default_factory=dict)  # "name.namespace.svc" -> pod IP

    def get(self, kind: str, namespace: str, name: str) -> Obj:
        out = subprocess.run(
            [*self.kubectl, "get", kind, name, "-n", namespace, "-o", "json"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        found: Obj = json.loads(out)
        return found

    def workloads(self, namespace: str) -> list[Obj]:
        out = subprocess.run(
            [*self.kubectl, "get", "deployments,statefulsets", "-n", namespace, "-o", "json"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        items: list[Obj] = json.loads(out)["items"]
        return items


@dataclass
class Pod:
    name: str
    namespace: str
    ip: str
    labels: dict[str, str]
    spec: Obj
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def running(self) -> bool:
        return bool(self.processes) and all(p.poll() is None for p in self.processes)


def pods_of(workload: Obj, host: Host) -> list[Pod]:
    """The pods a Deployment or StatefulSet controller would create (names as they would be)."""
    meta, spec = workload["metadata"], workload["spec"]
    template = spec["template"]
    pods = []
    for index in range(int(spec.get("replicas", 1))):
        labels = dict(template["metadata"].get("labels", {}))
        if workload["kind"] == "StatefulSet":
            name = f"{meta['name']}-{index}"
            labels["apps.kubernetes.io/pod-index"] = str(index)
            labels["statefulset.kubernetes.io/pod-name"] = name
        else:
            name = f"{meta['name']}-{index:05d}"
        ip = f"127.0.0.{host.next_ip}"
        host.next_ip += 1
        pods.append(Pod(name, meta["namespace"], ip, labels, template["spec"]))
    return pods


class ServiceProxy:
    """A Service as kube-proxy makes it: a virtual address (127.0.1.N) whose ports forward
    each new connection to one of the selected pods that is alive (and ready, when it has a
    readiness probe and the Service does not publish not-ready addresses), round robin."""

    def __init__(self, service: Obj, pods: list[Pod], ip: str) -> None:
        spec = service["spec"]
        selector = spec.get("selector") or {}
        self.ip = ip
        self._pods = [
            p
            for p in pods
            if p.namespace == service["metadata"]["namespace"]
            and selector
            and all(p.labels.get(k) == v for k, v in selector.items())
        ]
        self._any_readiness = bool(spec.get("publishNotReadyAddresses"))
        self._turn = itertools.count()
        self._listeners: list[socket.socket] = []
        for port in spec.get("ports", []):
            listener = socket.create_server((ip, port["port"]))
            self._listeners.append(listener)
            threading.Thread(
                target=self._accept, args=(listener, port["targetPort"]), daemon=True
            ).start()

    def _endpoint(self, target: int | str) -> tuple[str, int] | None:
        live = [
            p
            for p in self._pods
            if p.running()
            and (self._any_readiness or "readinessProbe" not in p.spec["containers"][0] or probe(p))
        ]
        if not live:
            return None
        pod = live[next(self._turn) % len(live)]
        if isinstance(target, int):
            return pod.ip, target
        ports = [c for container in pod.spec["containers"] for c in container.get("ports", [])]
        return pod.ip, next(int(c["containerPort"]) for c in ports if c.get("name") == target)

    def _accept(self, listener: socket.socket, target: int | str) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed
            endpoint = self._endpoint(target)
            if endpoint is None:
                client.close()
                continue
            try:
                upstream = socket.create_connection(endpoint, timeout=2)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            threading.Thread(target=_relay, args=(client, upstream), daemon=True).start()

    def close(self) -> None:
        for listener in self._listeners:
            listener.close()


def _relay(client: socket.socket, upstream: socket.socket) -> None:
    """Both directions of one connection; both ends closed when either side is done."""
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


def start_services(services: list[Obj], pods: list[Pod], host: Host) -> list[ServiceProxy]:
    """A proxy per Service that selects pods; its DNS name resolves to the proxy's address."""
    proxies = []
    for number, service in enumerate(s for s in services if s["spec"].get("selector")):
        meta = service["metadata"]
        proxy = ServiceProxy(service, pods, f"127.0.1.{number + 1}")
        host.dns[f"{meta['name']}.{meta['namespace']}.svc"] = proxy.ip
        proxies.append(proxy)
    return proxies


def _expand(text: str, env: Mapping[str, str]) -> str:
    return VAR.sub(lambda m: env.get(m.group(1), m.group(0)), text)


def _field(pod: Pod, path: str) -> str:
    if path == "status.podIP":
        return pod.ip
    if path == "metadata.name":
        return pod.name
    if path == "metadata.namespace":
        return pod.namespace
    label = re.fullmatch(r"metadata\.labels\['(.+)'\]", path)
    if label:
        return pod.labels[label.group(1)]
    raise AssertionError(f"fieldRef {path} is not supported by this test's kubelet")


def _secret_files(host: Host, namespace: str, name: str) -> dict[str, bytes]:
    secret = host.get("secret", namespace, name)
    return {key: base64.b64decode(value) for key, value in (secret.get("data") or {}).items()}


def _configmap_files(host: Host, namespace: str, name: str) -> dict[str, bytes]:
    config = host.get("configmap", namespace, name)
    return {key: value.encode() for key, value in (config.get("data") or {}).items()}


def _volume_files(volume: Obj, pod: Pod, host: Host) -> dict[str, tuple[bytes, int]] | None:
    """path -> (content, mode) for a Secret/ConfigMap/projected volume; None for emptyDir."""
    if "emptyDir" in volume:
        return None
    sources: list[tuple[str, Obj]]
    default_mode = 0o644
    if "projected" in volume:
        default_mode = volume["projected"].get("defaultMode", default_mode)
        sources = [
            (kind, source[kind])
            for source in volume["projected"]["sources"]
            for kind in ("secret", "configMap")
            if kind in source
        ]
    elif "secret" in volume:
        default_mode = volume["secret"].get("defaultMode", default_mode)
        sources = [("secret", {**volume["secret"], "name": volume["secret"]["secretName"]})]
    elif "configMap" in volume:
        default_mode = volume["configMap"].get("defaultMode", default_mode)
        sources = [("configMap", volume["configMap"])]
    else:
        raise AssertionError(f"volume {volume['name']}: kind not supported by this test")
    files: dict[str, tuple[bytes, int]] = {}
    for kind, source in sources:
        reader = _secret_files if kind == "secret" else _configmap_files
        data = reader(host, pod.namespace, source["name"])
        items = source.get("items") or [{"key": key, "path": key} for key in data]
        for item in items:
            files[item["path"]] = (data[item["key"]], item.get("mode", default_mode))
    return files


def materialize(pod: Pod, host: Host) -> dict[str, str]:
    """Write the pod's volumes; returns mountPath -> local directory for its containers."""
    root = host.scratch / pod.name
    volumes: dict[str, Path] = {}
    for volume in pod.spec.get("volumes", []):
        where = root / "volumes" / volume["name"]
        where.mkdir(parents=True, mode=0o700)
        for path, (content, mode) in (_volume_files(volume, pod, host) or {}).items():
            target = where / path
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            target.write_bytes(content)
            target.chmod(mode)
        volumes[volume["name"]] = where
    mounts: dict[str, str] = {}
    for container in pod.spec["containers"]:
        for mount in container.get("volumeMounts", []):
            mounts[mount["mountPath"]] = str(volumes[mount["name"]])
    return mounts


def _rewrite(text: str, paths: Mapping[str, str], dns: Mapping[str, str]) -> str:
    """One pass, longest prefix first (so /etc/pyccm/bus wins over /etc/pyccm), so that a
    rewritten path is never rewritten again."""
    prefixes = "|".join(re.escape(p) for p in sorted(paths, key=len, reverse=True))
    text = re.sub(rf"(?<![\w/.])({prefixes})(?=/|$|[^\w.-])", lambda m: paths[m.group(1)], text)
    for name, ip in dns.items():
        text = re.sub(rf"\b{re.escape(name)}(\.cluster\.local)?\b", ip, text)
    return text


def container_env(container: Obj, pod: Pod, host: Host) -> dict[str, str]:
    env: dict[str, str] = {}
    for entry in container.get("env", []):
        if "value" in entry:
            env[entry["name"]] = _expand(entry["value"], env)
            continue
        source = entry["valueFrom"]
        if "fieldRef" in source:
            env[entry["name"]] = _field(pod, source["fieldRef"]["fieldPath"])
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            env[entry["name"]] = _secret_files(host, pod.namespace, ref["name"])[
                ref["key"]
            ].decode()
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            env[entry["name"]] = _configmap_files(host, pod.namespace, ref["name"])[
                ref["key"]
            ].decode()
        else:
            raise AssertionError(f"env {entry['name']}: source not supported by this test")
    return env


def start(pod: Pod, host: Host) -> None:
    """Start every container of the pod (as the kubelet would, minus the isolation)."""
    mounts = materialize(pod, host)
    paths = {**host.image_paths, **mounts}
    account = f"{pod.namespace}/{pod.spec.get('serviceAccountName', 'default')}"
    for container in pod.spec["containers"]:
        declared = container_env(container, pod, host)
        argv = [_expand(a, declared) for a in [*container["command"], *container.get("args", [])]]
        argv = [_rewrite(a, paths, host.dns) for a in argv]
        env = {k: _rewrite(v, paths, host.dns) for k, v in declared.items()}
        if env.get("PYCCM_KUBECONFIG") == "" or any(
            a == "--kubeconfig=" for a in argv
        ):  # in-cluster: the pod's ServiceAccount
            assert pod.spec.get("automountServiceAccountToken", True), pod.name
            kubeconfig = str(host.service_account_kubeconfigs[account])
            env["PYCCM_KUBECONFIG"] = kubeconfig
            argv = [f"--kubeconfig={kubeconfig}" if a == "--kubeconfig=" else a for a in argv]
        image_bin = _rewrite("/app/.venv/bin", host.image_paths, {})
        process_env = {
            "PATH": f"{image_bin}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(host.scratch / pod.name),
            # The kubelet gives every container the API server's Service address.
            "KUBERNETES_SERVICE_HOST": host.api_server[0],
            "KUBERNETES_SERVICE_PORT": str(host.api_server[1]),
            # Part of "the image": where its Python finds pyccm, if the test was told.
            **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
            **env,
        }
        executable = shutil.which(argv[0], path=process_env["PATH"])
        assert executable, f"{pod.name}: {argv[0]} is not in the image"
        log = host.scratch / f"{pod.name}.{container['name']}.log"
        with open(log, "ab") as out:
            pod.processes.append(
                lifetime.spawn(
                    [executable, *argv[1:]], env=process_env, stdout=out, stderr=out, cwd="/"
                )
            )
        pod.logs.append(log)


def probe(pod: Pod, which: str = "readinessProbe") -> bool:
    """Run the pod's first container's HTTP probe, as the kubelet does (no cert check)."""
    container = pod.spec["containers"][0]
    spec = container[which]["httpGet"]
    port = spec["port"]
    if isinstance(port, str):
        port = next(p["containerPort"] for p in container["ports"] if p.get("name") == port)
    if spec.get("scheme", "HTTP") == "HTTPS":
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        connection: http.client.HTTPConnection = http.client.HTTPSConnection(
            pod.ip, port, timeout=2, context=context
        )
    else:
        connection = http.client.HTTPConnection(pod.ip, port, timeout=2)
    try:
        connection.request("GET", spec["path"])
        return connection.getresponse().status < 400
    except OSError:
        return False
    finally:
        connection.close()


def stop(pods: list[Pod]) -> None:
    """SIGTERM every container, then SIGKILL what is left after the grace period."""
    for pod in pods:
        for process in pod.processes:
            if process.poll() is None:
                process.terminate()
    for pod in pods:
        grace = pod.spec.get("terminationGracePeriodSeconds", 30)
        for process in pod.processes:
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def tail(pods: list[Pod], lines: int = 40) -> Iterator[str]:
    for pod in pods:
        for log in pod.logs:
            text = log.read_text(errors="replace").splitlines()[-lines:]
            yield f"--- {log.name}\n" + "\n".join(text)
