"""`/_sim/...`: the knobs of a running simulator, for the demo and fault drills that run it
as a separate process. The prefix cannot collide with a Kubernetes path, and every
endpoint needs the admin bearer token.

    GET  /_sim/state                 resourceVersion, object counts, open watches, faults,
                                      requests (the seq the next request log record gets)
    GET  /_sim/requests[?since=N]    the request log (seq, method, path, verb, user, code),
                                      the records numbered N and later
    POST /_sim/faults                {"latency": s, "errorRates": {verb: p},
                                      "throttleRate": p, "retryAfter": s}  (fields optional)
    POST /_sim/watches/cut           {"mode": "close"|"reset"}  end every open watch
    POST /_sim/watches/expire        {"count": n}  the next n watches get 410 Expired
    POST /_sim/history               {"size": n}   shrink/grow the retained window
    POST /_sim/seed                  {"nodes": n, "services": m, "clusterIPServices": k}
    POST /_sim/kubelet               {"node": name, "ready": "True"|"False"|"Unknown"}
    POST /_sim/churn                 {"count": n}  n node MODIFIED events (benchmarks)
    GET  /_sim/objects/<plural>/<ns>/<name>   an object straight from the store
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec
from aiohttp import web

from pyccm_sim.kube import errors, resources
from pyccm_sim.kube.errors import ApiError
from pyccm_sim.kube.seed import churn, seed, set_node_ready
from pyccm_sim.kube.settings import VERBS

if TYPE_CHECKING:
    from pyccm_sim.kube.server import KubeSim

Obj = dict[str, Any]


def _json(body: Obj | list[Any]) -> web.Response:
    return web.Response(body=msgspec.json.encode(body), content_type="application/json")


class AdminEndpoints:
    def __init__(self, sim: KubeSim) -> None:
        self.sim = sim

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        from pyccm_sim.kube.server import error_response

        try:
            self._authenticate(request)
            body = await self._body(request)
            return await self._route(request, request.match_info["tail"].strip("/"), body)
        except ApiError as error:
            return error_response(error)
        except (ValueError, TypeError, KeyError) as error:
            return error_response(errors.bad_request(f"bad admin request: {error}"))

    def _authenticate(self, request: web.Request) -> None:
        header = request.headers.get("Authorization", "")
        if header != f"Bearer {self.sim.settings.admin_token}":
            raise errors.unauthorized()

    async def _body(self, request: web.Request) -> Obj:
        raw = await request.read()
        if not raw.strip():
            return {}
        try:
            body = msgspec.json.decode(raw)
        except msgspec.DecodeError as error:
            raise errors.bad_request(f"malformed JSON: {error}") from error
        if not isinstance(body, dict):
            raise errors.bad_request("the body must be a JSON object")
        return body

    async def _route(self, request: web.Request, path: str, body: Obj) -> web.Response:
        method = request.method
        if method == "GET" and path == "state":
            return _json(self.state())
        if method == "GET" and path == "requests":
            since = int(request.query.get("since", "0"))
            return _json([r for r in self.sim.requests if r["seq"] >= since])
        if method == "GET" and path.startswith("objects/"):
            return self._object(path.split("/")[1:])
        if method != "POST":
            raise errors.method_not_allowed()
        handlers: dict[str, Callable[[Obj], Any]] = {
            "faults": self._faults,
            "watches/cut": self._cut,
            "watches/expire": self._expire,
            "history": self._history,
            "seed": self._seed,
            "kubelet": self._kubelet,
            "churn": self._churn,
        }
        handler = handlers.get(path)
        if handler is None:
            raise errors.no_such_path()
        if path == "churn":
            return _json(await self._churn(body))
        return _json(handler(body))

    def state(self) -> Obj:
        store = self.sim.store
        return {
            "resourceVersion": store.rv,
            "compactedResourceVersion": store.compacted_rv,
            "historySize": store.history_size,
            "objects": {
                f"{r.plural}.{r.group}" if r.group else r.plural: store.count(r)
                for r in resources.ALL_RESOURCES
            },
            "watches": len(store.watchers),
            "requests": self.sim.request_seq,
            "faults": self.sim.faults.describe(),
        }

    def _object(self, parts: list[str]) -> web.Response:
        if len(parts) == 2:
            parts = [parts[0], "", parts[1]]
        if len(parts) != 3:
            raise errors.no_such_path()
        plural, namespace, name = parts
        matches = [
            r for r in resources.ALL_RESOURCES if f"{r.plural}.{r.group}".rstrip(".") == plural
        ]
        if not matches:
            raise errors.no_such_path()
        entry = self.sim.api.get(matches[0], namespace, name)
        return web.Response(body=entry.raw, content_type="application/json")

    def _faults(self, body: Obj) -> Obj:
        faults = self.sim.faults
        if "latency" in body:
            faults.latency = max(0.0, float(body["latency"]))
        if "errorRates" in body:
            rates = {str(k): float(v) for k, v in dict(body["errorRates"]).items()}
            unknown = set(rates) - set(VERBS) - {"deletecollection"}
            if unknown:
                raise errors.bad_request(f"unknown verbs: {sorted(unknown)}")
            faults.error_rates = rates
        if "throttleRate" in body:
            faults.throttle_rate = float(body["throttleRate"])
        if "retryAfter" in body:
            faults.retry_after = max(0, int(body["retryAfter"]))
        return faults.describe()

    def _cut(self, body: Obj) -> Obj:
        mode = body.get("mode", "close")
        if mode not in ("close", "reset"):
            raise errors.bad_request('mode must be "close" or "reset"')
        return {"cut": self.sim.store.cut_watches(abort=mode == "reset")}

    def _expire(self, body: Obj) -> Obj:
        self.sim.faults.expire_next_watches = max(0, int(body.get("count", 1)))
        return self.sim.faults.describe()

    def _history(self, body: Obj) -> Obj:
        self.sim.store.resize_history(int(body["size"]))
        return self.state()

    def _seed(self, body: Obj) -> Obj:
        seed(
            self.sim.api,
            nodes=int(body.get("nodes", 0)),
            services=int(body.get("services", 0)),
            cluster_ip_services=int(body.get("clusterIPServices", 0)),
            first_node=self.sim.store.count(resources.NODES),
        )
        return self.state()

    def _kubelet(self, body: Obj) -> Obj:
        entry = set_node_ready(
            self.sim.api,
            str(body["node"]),
            str(body.get("ready", "True")),
            reason=str(body.get("reason", "")),
        )
        return {"resourceVersion": entry.rv}

    async def _churn(self, body: Obj) -> Obj:
        written = await churn(self.sim.api, count=int(body.get("count", 1000)))
        return {"events": written, "resourceVersion": self.sim.store.rv}
