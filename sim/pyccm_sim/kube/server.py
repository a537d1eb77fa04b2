"""The HTTP face of the simulator: kube-apiserver's URL scheme, headers and streams.

One aiohttp application, one catch-all route: the path is parsed here the way the API
server's router does (`/api/v1/...`, `/apis/<group>/<version>/...`, namespaced and
cluster-wide collections, `/status` subresources, legacy `/watch/` paths) so an unknown
path is a 404 Status rather than aiohttp's HTML. A request passes through the same
stages as in kube-apiserver: added latency (a knob), bearer-token authentication (401),
throttling (429 with Retry-After, a knob), RBAC (403), injected errors (a knob), then the
verb. Writes read the API server's query parameters (`dryRun`, `fieldManager`,
`fieldValidation`, `force`) and answer unknown fields with `Warning` headers. Every
failure leaves as a `kind: Status` body; an unexpected exception is a 500 Status and is
logged, never a dead server. /openapi/v2 and /openapi/v3 serve the schemas (openapi.py).

Watches are chunked streams of JSON lines written from the watcher's buffer in batches,
so one slow client costs only its own buffer. Admin endpoints for the knobs live under
`/_sim/` (see admin.py), which no Kubernetes path can collide with.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import yaml
from aiohttp import web

from pyccm_sim.kube import errors, openapi, protobuf, resources, reviews
from pyccm_sim.kube.api import (
    APPLY_PATCH,
    FIELD_VALIDATIONS,
    PATCH_TYPES,
    KubeApi,
    ListOptions,
    WatchStart,
    WriteOptions,
    bookmark_line,
    expired_line,
)
from pyccm_sim.kube.auth import Authorizer, BadRbacFile, Request, StoredRbac, rbac_documents
from pyccm_sim.kube.errors import ApiError
from pyccm_sim.kube.resources import ResourceType
from pyccm_sim.kube.settings import ADMIN_USER, Faults, SimSettings, User
from pyccm_sim.kube.store import Store, Watcher
from pyccm_sim.kube.tables import to_table, wants_table

log = logging.getLogger("pyccm_sim.kube")

Obj = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

VERSION_INFO = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-pyccm-sim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2024-08-13T00:00:00Z",
    "goVersion": "go1.22.5",
    "compiler": "gc",
    "platform": "linux/amd64",
}
_JSON = "application/json"
_BODY_TYPES = ("application/json", "application/yaml")
_PUBLIC_PATHS = ("/healthz", "/livez", "/readyz", "/version")
_decode = msgspec.json.Decoder().decode


@dataclass(frozen=True)
class Target:
    """A parsed resource URL."""

    rtype: ResourceType
    namespace: str | None  # None: a namespaced resource across all namespaces
    name: str = ""
    subresource: str = ""
    watch_path: bool = False

    @property
    def scope_namespace(self) -> str:
        return self.namespace or ""


def parse_target(path: str) -> Target | None:
    segments = [s for s in path.split("/") if s]
    if len(segments) >= 2 and segments[0] == "api":
        group, version, rest = "", segments[1], segments[2:]
    elif len(segments) >= 3 and segments[0] == "apis":
        group, version, rest = segments[1], segments[2], segments[3:]
    else:
        return None
    served = resources.resources_in(group, version)
    watch_path = bool(rest) and rest[0] == "watch"
    if watch_path:
        rest = rest[1:]
    namespace: str | None = None
    if (
        len(rest) >= 3
        and rest[0] == "namespaces"
        and rest[2] in served
        and served[rest[2]].namespaced
    ):
        namespace, rest = rest[1], rest[2:]
    if not rest or rest[0] not in served or len(rest) > 3:
        return None
    rtype = served[rest[0]]
    if rtype.namespaced and namespace is None and len(rest) > 1:
        return None
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if subresource and not (subresource == "status" and rtype.status_subresource):
        return None
    return Target(rtype, namespace, name, subresource, watch_path)


def verb_of(method: str, target: Target, watch: bool) -> str:
    if method == "GET":
        if watch:
            return "watch"
        return "get" if target.name else "list"
    if method == "DELETE" and not target.name:
        return "deletecollection"
    if method == "POST":
        # POST names no object; PUT and PATCH always do.
        return "" if target.name else "create"
    if not target.name:
        return ""
    return {"PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, "")


def json_response(
    body: Obj | bytes, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    raw = body if isinstance(body, bytes) else msgspec.json.encode(body)
    return web.Response(body=raw, status=status, content_type=_JSON, headers=headers)


def error_response(error: ApiError) -> web.Response:
    headers = {"Retry-After": str(error.retry_after)} if error.retry_after is not None else None
    return json_response(error.status(), error.code, headers)


class KubeSim:
    """The simulator's state and its aiohttp application. Lives on one event loop."""

    def __init__(self, *, settings: SimSettings, faults: Faults | None = None) -> None:
        self.settings = settings
        self.faults = faults or Faults()
        self.rng = random.Random(settings.random_seed)
        self.store = Store(history_size=settings.history_size, watch_buffer=settings.watch_buffer)
        self.api = KubeApi(
            store=self.store,
            rng=random.Random(settings.random_seed),
            namespace_controller=self._run_namespace_controller,
        )
        self.tokens: dict[str, User] = {settings.admin_token: ADMIN_USER, **dict(settings.tokens)}
        self.rbac = StoredRbac(self.store) if settings.rbac or settings.rbac_files else None
        self._load_rbac(settings.rbac_files)
        # The newest 50,000 answers; `seq` numbers every one, so a reader can ask for what
        # came after a mark even once older records have fallen off.
        self.requests: collections.deque[Obj] = collections.deque(maxlen=50_000)
        self.request_seq = 0
        self.server_address = f"{settings.host}:{settings.port}"
        self.watch_tasks: set[asyncio.Task[Any]] = set()
        self.started = time.monotonic()

    def _run_namespace_controller(self, work: Callable[[], object]) -> None:
        asyncio.get_running_loop().call_later(self.settings.namespace_cleanup_delay, work)

    @property
    def authorizer(self) -> Authorizer | None:
        """RBAC as the store holds it now; None when RBAC is off (everyone may do anything)."""
        return None if self.rbac is None else self.rbac.current()

    def _load_rbac(self, paths: tuple[Path, ...]) -> None:
        """Create the files' ClusterRoles, Roles and bindings (other kinds are skipped), as
        if applied before the simulator opened; a bad one is a BadRbacFile naming its file."""
        for path, document in rbac_documents(paths):
            rtype = resources.kind_named(str(document.get("apiVersion")), str(document.get("kind")))
            if rtype not in resources.RBAC_RESOURCES:
                continue
            meta = document.get("metadata") or {}
            namespace = (meta.get("namespace") or "default") if rtype.namespaced else ""
            try:
                self.api.create(rtype, namespace, document)
            except ApiError as error:
                raise BadRbacFile(f"{path}: {error.message}") from error

    def application(self) -> web.Application:
        from pyccm_sim.kube.admin import AdminEndpoints

        app = web.Application(client_max_size=self.settings.max_body_bytes)
        admin = AdminEndpoints(self)
        app.router.add_route("*", "/_sim/{tail:.*}", admin.dispatch)
        app.router.add_route("*", "/{tail:.*}", self.dispatch)
        return app

    # -- the request pipeline ------------------------------------------------------------

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        record: Obj = {
            "method": request.method,
            "path": request.path,
            "verb": "",
            "code": 0,
            "user": "",
        }
        try:
            response = await self._dispatch(request, record)
        except ApiError as error:
            response = error_response(error)
        except Exception as error:  # bad input must never kill the server
            log.exception("unexpected error serving %s %s", request.method, request.path)
            response = error_response(errors.internal_error(type(error).__name__))
        record["code"] = response.status
        record["seq"] = self.request_seq
        self.request_seq += 1
        self.requests.append(record)
        return response

    async def _dispatch(self, request: web.Request, record: Obj) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        if path in _PUBLIC_PATHS:
            return self._public(path)
        if self.faults.latency > 0:
            await asyncio.sleep(self.faults.latency)
        user = self.authenticate(request)
        record["user"] = user.name
        self._throttle()
        if path in reviews.PATHS:
            return await reviews.serve(self, request, path, user, record)
        discovery = self._discovery(path, request) or self._openapi(path, request)
        if discovery is not None:
            return discovery
        target = parse_target(path)
        if target is None:
            raise errors.no_such_path()
        watch = target.watch_path or request.query.get("watch") in ("true", "1")
        verb = verb_of(request.method, target, watch)
        record.update(
            verb=verb,
            resource=target.rtype.plural,
            namespace=target.scope_namespace,
            name=target.name,
            subresource=target.subresource,
        )
        if not verb or (target.subresource and verb not in ("get", "update", "patch")):
            raise errors.method_not_allowed()
        if request.method in ("POST", "PUT", "PATCH"):
            record["contentType"] = request.content_type
        self._authorize(user, verb, target)
        self._inject_error(verb)
        return await self._serve(request, target, verb)

    def _public(self, path: str) -> web.Response:
        if path == "/version":
            return json_response(VERSION_INFO)
        return web.Response(text="ok", content_type="text/plain")

    def authenticate(self, request: web.Request) -> User:
        """As kube-apiserver's authenticators in turn: a client certificate the client CA
        signed, then the Authorization header (a bearer token, or basic auth)."""
        user = _certificate_user(request)
        if user is not None:
            return user
        header = request.headers.get("Authorization", "")
        scheme, _, credential = header.partition(" ")
        if scheme.lower() == "bearer":
            user = self.tokens.get(credential.strip())
        elif scheme.lower() == "basic":
            user = self._password_user(credential.strip())
        if user is None:
            raise errors.unauthorized()
        return user

    def _password_user(self, credential: str) -> User | None:
        try:
            username, _, password = base64.b64decode(credential).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
        for name, secret, user in self.settings.passwords:
            if (name, secret) == (username, password):
                return user
        return None

    def _throttle(self) -> None:
        if self.faults.throttle_rate > 0 and self.rng.random() < self.faults.throttle_rate:
            raise errors.too_many_requests(self.faults.retry_after)

    def _authorize(self, user: User, verb: str, target: Target) -> None:
        if self.authorizer is None:
            return
        resource = target.rtype.plural + (f"/{target.subresource}" if target.subresource else "")
        self.authorizer.check(
            Request(user, verb, target.rtype.group, resource, target.scope_namespace, target.name)
        )

    def _inject_error(self, verb: str) -> None:
        rate = self.faults.error_rates.get(verb, 0.0)
        if rate > 0 and self.rng.random() < rate:
            raise errors.internal_error(f"injected {verb} failure")

    def _discovery(self, path: str, request: web.Request) -> web.Response | None:
        if request.method != "GET":
            return None
        segments = [s for s in path.split("/") if s]
        document: Obj | None = None
        if segments == ["api"]:
            document = resources.api_versions(self.server_address)
        elif segments == ["apis"]:
            document = resources.api_group_list()
        elif len(segments) == 2 and segments[0] == "api":
            document = resources.resource_list("", segments[1])
        elif len(segments) == 2 and segments[0] == "apis":
            document = resources.api_group(segments[1])
        elif len(segments) == 3 and segments[0] == "apis":
            document = resources.resource_list(segments[1], segments[2])
        else:
            return None
        if document is None:
            raise errors.no_such_path()
        return json_response(document)

    def _openapi(self, path: str, request: web.Request) -> web.Response | None:
        if request.method != "GET" or not path.startswith("/openapi/"):
            return None
        if path == "/openapi/v2":
            accept = request.headers.get("Accept", "")
            if openapi.V2_PROTOBUF in accept and "json" not in accept:
                return web.Response(
                    body=openapi.v2_protobuf(), content_type=openapi.V2_PROTOBUF_ANSWER
                )
            return json_response(openapi.v2_document())
        if path == "/openapi/v3":
            return json_response(openapi.v3_index())
        document = openapi.v3_documents().get(path.removeprefix("/openapi/v3/"))
        if document is None:
            raise errors.no_such_path()
        return json_response(document)

    # -- verbs --------------------------------------------------------------------------

    async def _serve(self, request: web.Request, target: Target, verb: str) -> web.StreamResponse:
        handlers: dict[str, Callable[[web.Request, Target], Awaitable[web.StreamResponse]]] = {
            "get": self._get,
            "list": self._list,
            "watch": self._watch,
            "create": self._create,
            "update": self._update,
            "patch": self._patch,
            "delete": self._delete,
            "deletecollection": self._delete_collection,
        }
        return await handlers[verb](request, target)

    async def _get(self, request: web.Request, target: Target) -> web.Response:
        entry = self.api.get(target.rtype, target.scope_namespace, target.name)
        if wants_table(request.headers.get("Accept", "")):
            return json_response(to_table(target.rtype, [entry.obj], None))
        return json_response(entry.raw)

    async def _list(self, request: web.Request, target: Target) -> web.Response:
        page = self.api.list(target.rtype, target.namespace, list_options(request.query))
        if wants_table(request.headers.get("Accept", "")):
            return json_response(to_table(target.rtype, [e.obj for e in page.entries], page))
        return json_response(page.encode())

    async def _create(self, request: web.Request, target: Target) -> web.Response:
        body = await read_object(request, self.settings.max_body_bytes)
        options = write_options(request.query)
        entry = self.api.create(target.rtype, target.scope_namespace, body, options=options)
        return written(entry.raw, options, 201)

    async def _update(self, request: web.Request, target: Target) -> web.Response:
        body = await read_object(request, self.settings.max_body_bytes)
        options = write_options(request.query)
        entry = self.api.update(
            target.rtype,
            target.scope_namespace,
            target.name,
            body,
            subresource=target.subresource,
            options=options,
        )
        return written(entry.raw, options)

    async def _patch(self, request: web.Request, target: Target) -> web.Response:
        options = write_options(request.query)
        content_type = request.content_type
        if content_type not in PATCH_TYPES:
            raise errors.unsupported_media_type(content_type, list(PATCH_TYPES))
        body = await read_body(request, self.settings.max_body_bytes)
        # A server-side apply that creates the object answers 201, as upstream.
        creating = content_type == APPLY_PATCH and not self._exists(target)
        entry = self.api.patch(
            target.rtype,
            target.scope_namespace,
            target.name,
            content_type,
            body,
            subresource=target.subresource,
            options=options,
        )
        return written(entry.raw, options, 201 if creating else 200)

    def _exists(self, target: Target) -> bool:
        namespace = target.scope_namespace if target.rtype.namespaced else ""
        return self.store.get(target.rtype, (namespace, target.name)) is not None

    async def _delete(self, request: web.Request, target: Target) -> web.Response:
        dry_run = _dry_run(request)
        options = await read_optional_object(request, self.settings.max_body_bytes)
        entry, gone = self.api.delete(
            target.rtype, target.scope_namespace, target.name, options, dry_run=dry_run
        )
        if not gone:
            return json_response(entry.raw)
        meta = entry.obj["metadata"]
        details = {"name": meta["name"], "kind": target.rtype.plural, "uid": meta.get("uid", "")}
        if target.rtype.group:
            details["group"] = target.rtype.group
        return json_response(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": details,
            }
        )

    async def _delete_collection(self, request: web.Request, target: Target) -> web.Response:
        dry_run = _dry_run(request)
        options = await read_optional_object(request, self.settings.max_body_bytes)
        page = self.api.list(target.rtype, target.namespace, list_options(request.query))
        for entry in page.entries:
            namespace, name = entry.ref
            self.api.delete(target.rtype, namespace, name, options, dry_run=dry_run)
        return json_response(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": {},
            }
        )

    # -- watch --------------------------------------------------------------------------

    async def _watch(self, request: web.Request, target: Target) -> web.StreamResponse:
        query = request.query
        options = list_options(query)
        timeout = float(_int_param(query, "timeoutSeconds") or self.settings.watch_timeout)
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        selection = self.api.watch_filter(target.rtype, target.namespace, options)
        if target.name:
            selection = self.api.watch_filter(
                target.rtype,
                target.namespace,
                ListOptions(
                    label_selector=options.label_selector,
                    field_selector=",".join(
                        f for f in (options.field_selector, f"metadata.name={target.name}") if f
                    ),
                ),
            )
        response = web.StreamResponse(
            headers={"Content-Type": _JSON, "Cache-Control": "no-cache, private"}
        )
        response.enable_chunked_encoding()
        if self.faults.expire_next_watches > 0:
            self.faults.expire_next_watches -= 1
            await response.prepare(request)
            await response.write(
                expired_line(
                    f"too old resource version: {options.resource_version or 0} ({self.store.rv})"
                )
            )
            await response.write_eof()
            return response
        start = WatchStart(
            selection=selection,
            resource_version=options.resource_version,
            send_initial_events=query.get("sendInitialEvents") in ("true", "1"),
            allow_bookmarks=bookmarks,
        )
        watcher = self.api.watch(start)
        try:
            await response.prepare(request)
            table = wants_table(request.headers.get("Accept", ""))
            await self._stream(
                response, watcher, target.rtype, timeout=timeout, bookmarks=bookmarks, table=table
            )
        except (ConnectionResetError, ConnectionError):
            pass  # the client went away; its watcher is dropped below
        finally:
            self.store.close_watch(watcher)
        if watcher.abort and request.transport is not None:
            request.transport.abort()
            return response
        await _safe_eof(response)
        return response

    async def _stream(
        self,
        response: web.StreamResponse,
        watcher: Watcher,
        rtype: ResourceType,
        *,
        timeout: float,
        bookmarks: bool,
        table: bool = False,
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        interval = self.settings.bookmark_interval
        next_bookmark = loop.time() + interval
        while True:
            lines = watcher.drain()
            if lines and table:
                lines = [table_event(rtype, line) for line in lines]
            if lines:
                await response.write(b"".join(lines))
            if watcher.closed:
                return
            now = loop.time()
            if bookmarks and now >= next_bookmark and not watcher.lines:
                await response.write(bookmark_line(rtype, self.store.rv))
                next_bookmark = now + interval
            if now >= deadline:
                return
            wait = min(deadline, next_bookmark) - now if bookmarks else deadline - now
            try:
                await asyncio.wait_for(watcher.wakeup.wait(), timeout=max(wait, 0.0))
            except TimeoutError:
                continue


def table_event(rtype: ResourceType, line: bytes) -> bytes:
    """`kubectl get -w` asks for Tables in the watch stream too: one row per event."""
    event = _decode(line)
    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
        event["object"] = to_table(rtype, [event["object"]], None)
    return msgspec.json.encode(event) + b"\n"


async def _safe_eof(response: web.StreamResponse) -> None:
    with contextlib.suppress(ConnectionResetError, ConnectionError):
        await response.write_eof()


def _dry_run(request: web.Request) -> bool:
    return request.query.get("dryRun") == "All"


def write_options(query: Any) -> WriteOptions:
    dry_run = query.get("dryRun", "")
    if dry_run not in ("", "All"):
        raise errors.bad_request(f'dryRun: Unsupported value: "{dry_run}": supported values: "All"')
    validation = query.get("fieldValidation") or "Warn"
    if validation not in FIELD_VALIDATIONS:
        raise errors.bad_request(
            f'fieldValidation: Unsupported value: "{validation}": supported values: '
            + ", ".join(f'"{v}"' for v in FIELD_VALIDATIONS)
        )
    return WriteOptions(
        dry_run=dry_run == "All",
        field_manager=query.get("fieldManager", ""),
        field_validation=validation,
        force=query.get("force") in ("true", "1"),
    )


def written(raw: bytes, options: WriteOptions, status: int = 200) -> web.Response:
    """A write's answer, with a `Warning: 299 - "..."` header per warning, as upstream."""
    response = json_response(raw, status)
    for warning in options.warnings:
        escaped = warning.replace("\\", "\\\\").replace('"', '\\"')
        response.headers.add("Warning", f'299 - "{escaped}"')
    return response


def _int_param(query: Any, name: str) -> int:
    text = query.get(name, "")
    if text == "":
        return 0
    try:
        value = int(text)
    except ValueError as error:
        raise errors.bad_request(f'invalid value for {name}: "{text}"') from error
    if value < 0:
        raise errors.bad_request(f"{name} must be non-negative")
    return value


def list_options(query: Any) -> ListOptions:
    return ListOptions(
        label_selector=query.get("labelSelector", ""),
        field_selector=query.get("fieldSelector", ""),
        limit=_int_param(query, "limit"),
        continue_token=query.get("continue", ""),
        resource_version=query.get("resourceVersion", ""),
        resource_version_match=query.get("resourceVersionMatch", ""),
    )


async def read_body(request: web.Request, limit: int) -> bytes:
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge as error:
        raise errors.entity_too_large(limit) from error


async def read_object(request: web.Request, limit: int) -> Obj:
    content_type = request.content_type
    if content_type == protobuf.MEDIA_TYPE:
        return decode_protobuf(await read_body(request, limit))
    if request.headers.get("Content-Type") and content_type not in _BODY_TYPES:
        raise errors.unsupported_media_type(content_type, list(_BODY_TYPES))
    body = await read_body(request, limit)
    return decode_object(body, yaml_body=content_type == "application/yaml")


def decode_protobuf(body: bytes) -> Obj:
    """A protobuf body of a kind kubectl's typed clients create (protobuf.py); another
    kind, or a field the simulator does not decode, is 415 as a media type it does not
    take; bytes that are not a protobuf object, 400."""
    try:
        return protobuf.decode(body)
    except protobuf.Unsupported as error:
        raise errors.unsupported_media_type(
            protobuf.MEDIA_TYPE, list(_BODY_TYPES), detail=f"the simulator does not decode {error}"
        ) from error
    except protobuf.Malformed as error:
        raise errors.bad_request(
            f"the body of the request could not be decoded: {error}"
        ) from error


async def read_optional_object(request: web.Request, limit: int) -> Obj | None:
    body = await read_body(request, limit)
    if not body.strip():
        return None
    return decode_object(body, yaml_body=request.content_type == "application/yaml")


def decode_object(body: bytes, *, yaml_body: bool) -> Obj:
    try:
        decoded = yaml.safe_load(body) if yaml_body else _decode(body)
    except (msgspec.DecodeError, yaml.YAMLError, UnicodeDecodeError) as error:
        raise errors.bad_request(
            f"the body of the request could not be decoded: {error}"
        ) from error
    if not isinstance(decoded, dict):
        raise errors.bad_request("the body of the request must be a JSON object")
    return decoded


def _certificate_user(request: web.Request) -> User | None:
    """The user of a verified client certificate: its CN, in the groups its O fields name.
    The TLS layer verified it (only a certificate the client CA signed gets this far)."""
    peer = request.transport.get_extra_info("peercert") if request.transport else None
    if not peer:
        return None
    fields = [item for rdn in peer.get("subject", ()) for item in rdn]
    names = [value for key, value in fields if key == "commonName"]
    groups = tuple(value for key, value in fields if key == "organizationName")
    return User(names[0], groups) if names else None
