"""The kube simulator on the wire: the official client's modules, client models back as
API JSON, raw HTTP requests and whole watch streams (tests/sim_kube)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from kubernetes import client as typed_client
from kubernetes import watch as typed_watch

from pyccm_sim.kube.testing import KubeSimHandle

# The client's pydantic models make every field Optional; the tests read API JSON instead
# (as_json) and treat the client modules as untyped.
client: Any = typed_client
watch: Any = typed_watch


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


_SERIALIZER = client.ApiClient()


def api_client(kube: KubeSimHandle, token: str | None = None) -> Any:
    """The official client's `ApiClient` for the simulator (the admin unless `token`)."""
    configuration = client.Configuration()
    configuration.host = kube.url
    if kube.ca_file is not None:
        configuration.ssl_ca_cert = str(kube.ca_file)
    configuration.api_key = {"authorization": f"Bearer {token or kube.token}"}
    return client.ApiClient(configuration)


def as_json(model: object) -> Any:
    """A client model back as API JSON (camelCase), so assertions read like the wire and
    the client's Optional-everywhere models need no None checks."""
    return _SERIALIZER.sanitize_for_serialization(model)


def http(
    kube: KubeSimHandle,
    method: str,
    path: str,
    body: bytes | None = None,
    *,
    content_type: str = "application/json",
    token: str | None = "admin",
    accept: str = "application/json",
) -> Reply:
    """One raw HTTP request; `token="admin"` sends the admin token, None sends none."""
    headers = {"Accept": accept}
    if body is not None:
        headers["Content-Type"] = content_type
    if token is not None:
        headers["Authorization"] = f"Bearer {kube.token if token == 'admin' else token}"
    request = urllib.request.Request(kube.url + path, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return Reply(response.status, dict(response.headers), response.read())
    except urllib.error.HTTPError as error:
        with error:
            return Reply(error.code, dict(error.headers), error.read())


def watch_lines(kube: KubeSimHandle, path: str) -> list[dict[str, Any]]:
    """Read a whole (time-limited) watch stream as decoded events."""
    reply = http(kube, "GET", path)
    assert reply.status == 200, reply.body
    return [json.loads(line) for line in reply.body.splitlines() if line.strip()]
