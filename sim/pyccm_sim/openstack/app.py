"""The aiohttp application: routing, token checks, injected faults, the call log, `/_sim`.

One middleware wraps every service request, in this order: injected latency, injected
failures (`fail_next` rules, then random `error_rates`), the handler (which checks the
token and parses the body), and finally the call-log record. Errors of every origin
(handlers' `ApiError`, aiohttp's own 404/405, unexpected exceptions) leave as JSON in the
shape of the service the path belongs to, so bad input never crashes the server and
clients see what a real cloud would send.

Route handlers are looked up in `cloud.route_table` on every request rather than bound
at start-up, so `Cloud.reset()` can swap the models under a running server.

The admin API lives under `/_sim/`, a prefix no OpenStack service uses; it is not
authenticated (the simulator binds to loopback), not logged and not subject to faults.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from aiohttp import web

from pyccm_sim.openstack import bodylimit
from pyccm_sim.openstack.calllog import Seq, mask_query
from pyccm_sim.openstack.cloud import Cloud
from pyccm_sim.openstack.errors import ApiError, bad_request, render, unauthorized
from pyccm_sim.openstack.routing import Reply, Req
from pyccm_sim.openstack.settings import FailRule

log = logging.getLogger("pyccm_sim.openstack")

SERVICE_PREFIXES = (
    ("/identity", "identity"),
    ("/compute", "compute"),
    ("/network", "network"),
    ("/load-balancer", "load-balancer"),
)
ADMIN_PREFIX = "/_sim"
RETRYABLE = frozenset({429, 503})
JSON = "application/json"
AiohttpHandler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


def service_of(path: str) -> str:
    for prefix, service in SERVICE_PREFIXES:
        if path == prefix or path.startswith(prefix + "/"):
            return service
    return "unknown"


def json_response(status: int, body: Any, headers: Any = None) -> web.Response:
    if body is None or status == 204:
        return web.Response(status=status, headers=headers)
    return web.Response(status=status, body=_encode(body), content_type=JSON, headers=headers)


def error_response(service: str, error: ApiError) -> web.Response:
    return json_response(error.status, render(service, error), error.headers or None)


class Faults:
    """Decides, per request, whether an injected failure answers instead of the service."""

    def __init__(self, cloud: Cloud) -> None:
        self._cloud = cloud
        self._rng = random.Random(cloud.settings.random_seed)

    async def delay(self) -> None:
        knobs = self._cloud.knobs
        if knobs.latency_ms or knobs.latency_jitter_ms:
            jitter = self._rng.uniform(0.0, knobs.latency_jitter_ms)
            await asyncio.sleep((knobs.latency_ms + jitter) / 1000.0)

    def check(self, service: str, method: str) -> None:
        knobs = self._cloud.knobs
        for index, rule in enumerate(knobs.fail_next):
            if rule.service in {service, "*"} and (not rule.methods or method in rule.methods):
                remaining = rule.count - 1
                knobs.fail_next[index : index + 1] = (
                    [dataclasses.replace(rule, count=remaining)] if remaining > 0 else []
                )
                raise _injected(rule.status, rule.retry_after_s)
        for status, rate in knobs.error_rates.get(service, {}).items():
            if rate > 0 and self._rng.random() < rate:
                raise _injected(status, knobs.retry_after_s)


def _injected(status: int, retry_after_s: float | None) -> ApiError:
    headers = {}
    if status in RETRYABLE and retry_after_s is not None:
        # Retry-After is whole seconds on the wire; round up so clients never retry early.
        headers["Retry-After"] = str(max(0, int(-(-retry_after_s // 1))))
    message = "Rate limit exceeded." if status == 429 else f"Injected fault: HTTP {status}."
    return ApiError(status, message, headers=headers)


def make_middleware(cloud: Cloud) -> Any:
    faults = Faults(cloud)

    @web.middleware
    async def middleware(request: web.Request, handler: AiohttpHandler) -> web.StreamResponse:
        path = request.path
        if path.startswith(ADMIN_PREFIX + "/"):
            return await handler(request)
        service = service_of(path)
        started = time.perf_counter()
        response: web.StreamResponse
        try:
            await faults.delay()
            faults.check(service, request.method)
            if await _body_too_large(request, service, cloud.knobs.max_request_body_size):
                response = bodylimit.too_large(request.headers.get("Accept", ""))
            else:
                response = await handler(request)
        except ApiError as error:
            response = error_response(service, error)
        except web.HTTPException as http_error:
            response = error_response(
                service, ApiError(http_error.status, _router_message(http_error.status))
            )
        except Exception:
            log.exception("unexpected error answering %s %s", request.method, path)
            response = error_response(service, ApiError(500, "An unexpected error occurred."))
        latency_ms = (time.perf_counter() - started) * 1000.0
        shown = path + ("?" + mask_query(request.query_string) if request.query_string else "")
        cloud.calls.record(
            service=service,
            method=request.method,
            path=shown,
            status=response.status,
            latency_ms=latency_ms,
        )
        if cloud.settings.access_log:
            log.info(
                "%s %s %s %d %.1fms", service, request.method, shown, response.status, latency_ms
            )
        return response

    return middleware


async def _body_too_large(request: web.Request, service: str, limit: int) -> bool:
    """oslo.middleware's check: the declared length, else (chunked) the bytes actually sent."""
    if not limit or service not in bodylimit.LIMITED_SERVICES:
        return False
    if request.content_length is not None:
        return request.content_length > limit
    # Chunked: read it (aiohttp keeps the bytes for the handler) and count.
    return request.body_exists and len(await request.read()) > limit


def _router_message(status: int) -> str:
    if status == 405:
        return "The method specified is not allowed for this resource."
    if status == 404:
        return "The resource could not be found."
    return "The request could not be handled."


def make_handler(cloud: Cloud, key: tuple[str, str]) -> AiohttpHandler:
    async def handle(request: web.Request) -> web.StreamResponse:
        route = cloud.route_table[key]
        project_id = None
        if route.auth:
            token = cloud.keystone.validate(request.headers.get("X-Auth-Token"))
            if token is None:
                raise unauthorized()
            project_id = token.project_id
        body = await _read_json(request)
        req = Req(
            method=request.method,
            path=request.path,
            query=request.query,
            match=request.match_info,
            headers=request.headers,
            body=body,
            base_url=f"{request.scheme}://{request.host}",
            project_id=project_id,
        )
        reply: Reply = route.handler(req)
        if request.method == "HEAD":
            return web.Response(status=reply.status, headers=reply.headers)
        return json_response(reply.status, reply.body, reply.headers)

    return handle


async def _read_json(request: web.Request) -> Any:
    if not request.body_exists:
        return None
    raw = await request.read()
    if not raw.strip():
        return None
    try:
        return _decode(raw)
    except msgspec.DecodeError:
        raise bad_request("Malformed JSON in request body.") from None


def build_app(cloud: Cloud) -> web.Application:
    # aiohttp's own cap, above any `max_request_body_size` a benchmark sets (a fully
    # populated create for 5,000 members is about 0.5 MiB).
    app = web.Application(middlewares=[make_middleware(cloud)], client_max_size=256 * 1024 * 1024)
    for key in cloud.route_table:
        method, path = key
        app.router.add_route(method, path, make_handler(cloud, key))
    add_admin_routes(app, cloud)
    # Anything else under a service prefix (or nowhere) gets that service's 404 via the middleware.
    return app


# -- the /_sim admin API --------------------------------------------------------------------------


def _admin(action: Callable[[web.Request, Any], Any]) -> AiohttpHandler:
    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            body = await _read_json(request)
            return json_response(200, action(request, body))
        except ApiError as error:
            return json_response(error.status, {"error": error.message})
        except (ValueError, TypeError, KeyError) as error:
            return json_response(400, {"error": str(error)})

    return handle


def add_admin_routes(app: web.Application, cloud: Cloud) -> None:
    def calls(request: web.Request, _: Any) -> Any:
        since = Seq(int(request.query.get("since", "0")))
        return {
            "calls": [dataclasses.asdict(call) for call in cloud.calls.since(since)],
            "next": cloud.calls.mark(),
        }

    def clear_calls(request: web.Request, _: Any) -> Any:
        cloud.calls.clear()
        return {"next": cloud.calls.mark()}

    def set_knobs(request: web.Request, body: Any) -> Any:
        if not isinstance(body, dict):
            raise bad_request("PATCH /_sim/knobs takes a JSON object")
        if "fail_next" in body:
            body = {**body, "fail_next": [FailRule(**rule) for rule in body["fail_next"]]}
        cloud.knobs.update(body)
        return cloud.knobs.as_dict()

    def add_server(request: web.Request, body: Any) -> Any:
        server = cloud.add_node_server(
            int(body["index"]),
            status=str(body.get("status", "ACTIVE")),
            floating_ip=bool(body.get("floating_ip", False)),
            zone=body.get("zone"),
        )
        return {"id": server["id"], "name": server["name"]}

    def set_status(request: web.Request, body: Any) -> Any:
        server = cloud.server_by_name(request.match_info["name"])
        cloud.nova.set_status(server["id"], str(body["status"]))
        return {"id": server["id"], "status": body["status"]}

    def delete_server(request: web.Request, _: Any) -> Any:
        server = cloud.server_by_name(request.match_info["name"])
        cloud.nova.delete_server(server["id"])
        return {"deleted": server["id"]}

    def floating_ip(request: web.Request, _: Any) -> Any:
        fip = cloud.add_floating_ip(request.match_info["name"])
        return {"id": fip["id"], "floating_ip_address": fip["floating_ip_address"]}

    def stick(request: web.Request, _: Any) -> Any:
        cloud.octavia.stick(request.match_info["id"])
        return {"stuck": request.match_info["id"]}

    def release(request: web.Request, _: Any) -> Any:
        cloud.octavia.release(request.match_info["id"])
        return {"released": request.match_info["id"]}

    def add_load_balancer(request: web.Request, body: Any) -> Any:
        """A load balancer made behind the controller's back (on the private subnet unless
        the body names a VIP): what a leaked or foreign one looks like, for demos and
        tests of `pyccm gc`."""
        fields = body if isinstance(body, dict) else {}
        fields = {"vip_subnet_id": cloud.seeded.private_subnet_id, **fields}
        lb = cloud.octavia.create_tree(fields)
        return {"id": lb["id"], "name": lb["name"]}

    def reset(request: web.Request, body: Any) -> Any:
        options = body if isinstance(body, dict) else {}
        cloud.reset(knobs=bool(options.get("knobs", True)), calls=bool(options.get("calls", True)))
        return cloud.describe()

    routes = [
        ("GET", "/health", lambda r, b: {"ok": True}),
        ("GET", "/calls", calls),
        ("DELETE", "/calls", clear_calls),
        (
            "GET",
            "/counters",
            lambda r, b: {"counters": cloud.counters.snapshot(), "inventory": cloud.inventory()},
        ),
        ("GET", "/knobs", lambda r, b: cloud.knobs.as_dict()),
        ("PATCH", "/knobs", set_knobs),
        ("GET", "/describe", lambda r, b: cloud.describe()),
        ("POST", "/reset", reset),
        ("POST", "/tokens/revoke", lambda r, b: {"revoked": cloud.keystone.revoke_all()}),
        ("POST", "/servers", add_server),
        ("PUT", "/servers/{name}/status", set_status),
        ("DELETE", "/servers/{name}", delete_server),
        ("POST", "/servers/{name}/floating-ip", floating_ip),
        ("POST", "/loadbalancers", add_load_balancer),
        ("POST", "/loadbalancers/{id}/stick", stick),
        ("POST", "/loadbalancers/{id}/release", release),
        ("GET", "/resources/{kind}", lambda r, b: {"items": cloud.snapshot(r.match_info["kind"])}),
    ]
    for method, path, action in routes:
        app.router.add_route(method, ADMIN_PREFIX + path, _admin(action))
