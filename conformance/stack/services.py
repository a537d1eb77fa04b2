"""Runs inside one OpenStack service's own venv: initialise its database, or serve its API.

    python services.py init {neutron,octavia} STACK_DIR
    python services.py serve {keystone,neutron,octavia,nova} STACK_DIR PORT [HTTPS_PORT MTLS_PORT]
    python services.py nova-servers STACK_DIR < servers.json

This is test infrastructure for pyccm's conformance tier, not product code: it hosts the
real WSGI apps of Keystone, Neutron, Octavia and Nova (2024.1 to 2026.2, see
`conformance/requirements/`) on 127.0.0.1, on sqlite:

* one threaded wsgiref server per service with **one lock around every request** (sqlite
  is only stable one request at a time), writing an access log of JSON lines (method,
  path, query without secret-looking values, status, duration, user agent, and the
  listener, port and Host the request arrived on; never bodies);
* besides plain HTTP on PORT, the same app (and the same lock) on HTTPS_PORT (TLS with
  `STACK_DIR/tls/server.pem`, signed by the session's private CA) and on MTLS_PORT (the same,
  and a client certificate signed by `STACK_DIR/tls/ca.pem` is required);
* Keystone also under the path prefix `/identity`, as devstack mounts it: the prefix moves
  into SCRIPT_NAME, so the version documents' links carry it;
* Octavia: every provider name pyccm may ask for (`amphora`, `octavia`) loads the noop
  driver, whose VIP hook declines so the API allocates a **real Neutron VIP port**; a
  settler thread, under the same lock, moves `PENDING_*` objects to `ACTIVE` / `DELETED`
  after a delay through Octavia's own `DriverUpdater` (what octavia-driver-agent runs for
  real providers), or to `ERROR` for load balancers whose name matches a pattern listed in
  `STACK_DIR/octavia/errors` (one regex a line, re-read every pass), and not at all for
  those matching a pattern in `STACK_DIR/octavia/holds` (a test that needs a busy load
  balancer holds it, instead of racing the delay);
* Nova cannot boot anything here: servers are written into its databases with nova's own
  objects (`nova-servers`), and set SHUTOFF or ACTIVE there.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import sys
import threading
import time
import urllib.parse
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

SECRET_WORDS = ("password", "secret", "token", "key")
LOCK = threading.Lock()
# Every listener's threads write the service's one access log: one whole line at a time.
LOG_LOCK = threading.Lock()


# --- serving -------------------------------------------------------------------------------------


class ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return


def redacted(query: str) -> str:
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    return urllib.parse.urlencode(
        [(k, "***" if any(w in k.lower() for w in SECRET_WORDS) else v) for k, v in pairs]
    )


def logged(app: Any, service: str, log: Any, listener: str, port: int) -> Any:
    tls = listener != "http"

    def wrapper(environ: dict[str, Any], start_response: Any) -> Any:
        started = time.monotonic()
        status: list[str] = ["000"]
        path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
        if tls:  # wsgiref guesses the scheme from $HTTPS, which nothing sets here
            environ["wsgi.url_scheme"], environ["HTTPS"] = "https", "on"

        def recording_start(code: str, headers: Any, exc_info: Any = None) -> Any:
            status[0] = code.split(" ", 1)[0]
            return start_response(code, headers, exc_info)

        with LOCK:
            body = b"".join(app(environ, recording_start))
        entry = {
            "time": time.time(),
            "service": service,
            "method": environ.get("REQUEST_METHOD", ""),
            "path": path,
            "query": redacted(environ.get("QUERY_STRING", "")),
            "status": int(status[0]),
            "duration_ms": round((time.monotonic() - started) * 1000, 1),
            "user_agent": environ.get("HTTP_USER_AGENT", ""),
            "listener": listener,
            "port": port,
            "host": environ.get("HTTP_HOST", ""),
        }
        with LOG_LOCK:
            log.write(json.dumps(entry) + "\n")
        return [body]

    return wrapper


def mounted(app: Any, prefix: str) -> Any:
    """`app` at `/` and under `prefix` (moved into SCRIPT_NAME, as a web server's mount does)."""

    def wrapper(environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        if path == prefix or path.startswith(prefix + "/"):
            environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + prefix
            environ["PATH_INFO"] = path[len(prefix) :]
        return app(environ, start_response)

    return wrapper


class TLSHandler(QuietHandler):
    """The TLS handshake in the request's own thread, not in the accept loop: a client that
    connects and never speaks (or a refused one) holds up nobody else."""

    def setup(self) -> None:
        self.request.do_handshake()
        super().setup()


class TLSServer(ThreadingServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        print(f"tls: {client_address}: {type(error).__name__}: {error}", file=sys.stderr)


def tls_context(stack: Path, *, client_certificates: bool) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls = stack / "tls"
    context.load_cert_chain(tls / "server.pem", tls / "server-key.pem")
    if client_certificates:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(tls / "ca.pem")
    return context


def serve(service: str, stack: Path, ports: list[int]) -> None:
    """The app on each listener: `http` on ports[0]; `https` and `mtls` on ports[1:3]."""
    sys.argv = [sys.argv[0]]  # the apps parse sys.argv with oslo.config at import time
    app = BUILDERS[service](stack)
    if service == "keystone":
        app = mounted(app, "/identity")
    log = (stack / f"{service}-access.log").open("a", buffering=1)
    servers = []
    for listener, port in zip(("http", "https", "mtls"), ports, strict=False):
        tls = listener != "http"
        server = make_server(
            "127.0.0.1",
            port,
            logged(app, service, log, listener, port),
            server_class=TLSServer if tls else ThreadingServer,
            handler_class=TLSHandler if tls else QuietHandler,
        )
        if tls:
            context = tls_context(stack, client_certificates=listener == "mtls")
            server.socket = context.wrap_socket(
                server.socket, server_side=True, do_handshake_on_connect=False
            )
        servers.append(server)
    for server in servers[1:]:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"{service} serving on {', '.join(map(str, ports))}", flush=True)
    servers[0].serve_forever()


def keystone_app(stack: Path) -> Any:
    os.environ["OS_KEYSTONE_CONFIG_FILES"] = str(stack / "keystone" / "keystone.conf")
    from keystone.server import wsgi

    return wsgi.initialize_public_application()


def neutron_app(stack: Path) -> Any:
    os.environ["OS_NEUTRON_CONFIG_DIR"] = str(stack / "neutron")
    os.environ["OS_NEUTRON_CONFIG_FILES"] = "neutron.conf"
    try:
        from neutron.wsgi import api
    except ImportError:  # Neutron 24 (2024.1): the paste app its eventlet server loads
        from neutron import server
        from neutron.server import api_eventlet

        return server.boot_server(api_eventlet.eventlet_api_server)
    return api.application


def nova_app(stack: Path) -> Any:
    os.environ["OS_NOVA_CONFIG_DIR"] = str(stack / "nova")
    os.environ["OS_NOVA_CONFIG_FILES"] = "api-paste.ini;nova.conf"
    try:
        from nova.wsgi import osapi_compute
    except ImportError:  # Nova 29 (2024.1): what its pbr script nova-api-wsgi calls
        from nova.api.openstack.compute import wsgi

        return wsgi.init_application()
    return osapi_compute.application


def octavia_app(stack: Path) -> Any:
    from octavia.api import app as octavia_app_module
    from octavia.api.drivers import driver_factory
    from octavia.api.drivers.noop_driver import driver as noop

    def vip_from_neutron(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError  # the API then allocates the VIP port in Neutron

    noop.NoopProviderDriver.create_vip_port = vip_from_neutron
    original = driver_factory.get_driver

    def any_name_is_noop(provider: Any) -> Any:
        original(provider)  # the enabled-provider check, with its real errors
        driver = noop.NoopProviderDriver()
        driver.name = provider
        return driver

    driver_factory.get_driver = any_name_is_noop
    conf = str(stack / "octavia" / "octavia.conf")
    app = octavia_app_module.setup_app(argv=["octavia-api", "--config-file", conf])
    threading.Thread(target=settle_forever, args=(stack,), daemon=True).start()
    return app


BUILDERS = {
    "keystone": keystone_app,
    "neutron": neutron_app,
    "nova": nova_app,
    "octavia": octavia_app,
}


# --- Octavia's settler ---------------------------------------------------------------------------


def settle_forever(stack: Path) -> None:
    delay = float(os.environ.get("PYCCM_SETTLE_DELAY_S", "0.5"))
    while True:
        time.sleep(0.1)
        try:
            with LOCK:
                settle_once(stack, delay)
        except Exception as exc:  # keep settling; the API's own log has the detail
            print(f"settler: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)


def name_patterns(stack: Path, kind: str) -> list[re.Pattern[str]]:
    """`STACK_DIR/octavia/<kind>`'s regexes (errors, holds), one a line."""
    path = stack / "octavia" / kind
    if not path.exists():
        return []
    return [re.compile(line) for line in path.read_text().splitlines() if line.strip()]


def settle_once(stack: Path, delay: float) -> None:
    from octavia.api.drivers.driver_agent.driver_updater import DriverUpdater
    from octavia.db import api as db_api
    from octavia.db import models

    patterns = name_patterns(stack, "errors")
    holds = name_patterns(stack, "holds")
    session = db_api.get_session()
    with session.begin():
        updates = [
            _status_update(lb, patterns)
            for lb in _pending_lbs(session, models, delay)
            if not any(h.search(lb.name or "") for h in holds)
        ]
    for update in updates:
        settle_members(update.pop("members"))
        DriverUpdater().update_loadbalancer_status(update)


def settle_members(changes: list[dict[str, Any]]) -> None:
    """What DriverUpdater does to members, in one transaction instead of one per member:
    a pool of 1,500 members would otherwise hold the request lock for a minute."""
    from octavia.common import data_models
    from octavia.db import api as db_api
    from octavia.db import models
    from octavia.db.repositories import Repositories

    if not changes:
        return
    session = db_api.get_session()
    with session.begin():
        gone = [c["id"] for c in changes if c["provisioning_status"] == "DELETED"]
        if gone:
            rows = session.query(models.Member).filter(models.Member.id.in_(gone)).all()
            by_project: dict[str, int] = {}
            for row in rows:
                by_project[row.project_id] = by_project.get(row.project_id, 0) + 1
                session.delete(row)
            for project_id, count in by_project.items():
                Repositories().decrement_quota(
                    session, data_models.Member, project_id, quantity=count
                )
        for status in {(c["provisioning_status"], c.get("operating_status")) for c in changes}:
            if status[0] == "DELETED":
                continue
            ids = [
                c["id"]
                for c in changes
                if (c["provisioning_status"], c.get("operating_status")) == status
            ]
            session.query(models.Member).filter(models.Member.id.in_(ids)).update(
                {"provisioning_status": status[0], "operating_status": status[1]},
                synchronize_session=False,
            )


def _pending_lbs(session: Any, models: Any, delay: float) -> list[Any]:
    import datetime

    now = datetime.datetime.utcnow()
    found = []
    for lb in session.query(models.LoadBalancer).all():
        if not lb.provisioning_status.startswith("PENDING_"):
            continue
        stamp = lb.updated_at or lb.created_at
        if stamp is not None and (now - stamp).total_seconds() < delay:
            continue
        found.append(lb)
    return found


def _status_update(lb: Any, patterns: list[re.Pattern[str]]) -> dict[str, Any]:
    """The provider status update that settles `lb` and every pending object under it."""
    failing = any(p.search(lb.name or "") for p in patterns)

    def settled(obj: Any) -> dict[str, Any] | None:
        status = obj.provisioning_status
        if not status.startswith("PENDING_"):
            return None
        if status == "PENDING_DELETE":
            return {"id": obj.id, "provisioning_status": "DELETED"}
        if failing:
            return {"id": obj.id, "provisioning_status": "ERROR", "operating_status": "ERROR"}
        online = "ONLINE" if getattr(obj, "enabled", True) else "OFFLINE"
        return {"id": obj.id, "provisioning_status": "ACTIVE", "operating_status": online}

    update: dict[str, list[dict[str, Any]]] = {
        "loadbalancers": [],
        "listeners": [],
        "pools": [],
        "members": [],
        "healthmonitors": [],
        "l7policies": [],
        "l7rules": [],
    }
    deleting = lb.provisioning_status == "PENDING_DELETE"

    def add(kind: str, obj: Any) -> None:
        entry = {"id": obj.id, "provisioning_status": "DELETED"} if deleting else settled(obj)
        if entry is not None:
            update[kind].append(entry)

    for listener in lb.listeners:
        add("listeners", listener)
    for pool in lb.pools:
        add("pools", pool)
        for member in pool.members:
            add("members", member)
        if pool.health_monitor is not None:
            add("healthmonitors", pool.health_monitor)
    add("loadbalancers", lb)
    return update


# --- initialising databases ----------------------------------------------------------------------


def init_neutron(stack: Path) -> None:
    sys.argv = [sys.argv[0]]
    from neutron.common import config as neutron_config
    from neutron.db.migration.models import head
    from sqlalchemy import create_engine

    del neutron_config
    engine = create_engine(f"sqlite:///{stack}/neutron/neutron.sqlite")
    head.get_metadata().create_all(engine)


def init_octavia(stack: Path) -> None:
    from octavia.common import constants
    from octavia.db import base_models, models
    from oslo_db.sqlalchemy import enginefacade

    facade = enginefacade.transaction_context()
    facade.configure(connection=f"sqlite:///{stack}/octavia/octavia.sqlite", sqlite_fk=True)
    engine = facade.writer.get_engine()
    base_models.BASE.metadata.create_all(engine)
    session = facade.writer.get_sessionmaker()()
    lookups = [
        (constants.SUPPORTED_PROVISIONING_STATUSES, models.ProvisioningStatus),
        (constants.SUPPORTED_HEALTH_MONITOR_TYPES, models.HealthMonitorType),
        (constants.SUPPORTED_LB_ALGORITHMS, models.Algorithm),
        (constants.SUPPORTED_PROTOCOLS, models.Protocol),
        (constants.SUPPORTED_OPERATING_STATUSES, models.OperatingStatus),
        (constants.SUPPORTED_SP_TYPES, models.SessionPersistenceType),
        (constants.SUPPORTED_AMPHORA_ROLES, models.AmphoraRoles),
        (constants.SUPPORTED_LB_TOPOLOGIES, models.LBTopology),
        (constants.SUPPORTED_VRRP_AUTH, models.VRRPAuthMethod),
        (constants.SUPPORTED_L7RULE_TYPES, models.L7RuleType),
        (constants.SUPPORTED_L7RULE_COMPARE_TYPES, models.L7RuleCompareType),
        (constants.SUPPORTED_L7POLICY_ACTIONS, models.L7PolicyAction),
        (constants.SUPPORTED_CLIENT_AUTH_MODES, models.ClientAuthenticationMode),
    ]
    with session.begin():
        for names, model in lookups:
            for name in names:
                session.add(model(name=name))
        nil = constants.NIL_UUID
        session.add(
            models.FlavorProfile(
                id=nil,
                name="DELETED-PLACEHOLDER",
                provider_name=constants.DELETED,
                flavor_data="{}",
            )
        )
        session.flush()
        session.add(
            models.Flavor(
                id=nil,
                flavor_profile_id=nil,
                name="DELETED-PLACEHOLDER",
                enabled=False,
                description="Placeholder for DELETED LBs with DELETED flavors",
            )
        )
        session.add(
            models.AvailabilityZoneProfile(
                id=nil,
                name="DELETED-PLACEHOLDER",
                provider_name=constants.DELETED,
                availability_zone_data="{}",
            )
        )
        session.flush()
        session.add(
            models.AvailabilityZone(
                name=nil,
                availability_zone_profile_id=nil,
                enabled=False,
                description="Placeholder for DELETED LBs with DELETED availability zones",
            )
        )


# --- Nova servers --------------------------------------------------------------------------------


def nova_servers(stack: Path, orders: list[dict[str, Any]]) -> None:
    """Each order: {"op": "create"|"status", ...}; see realcloud.py."""
    sys.argv = [sys.argv[0], "--config-file", str(stack / "nova" / "nova.conf")]
    from nova import config, context, objects
    from nova.network import model as network_model

    config.parse_args(sys.argv)
    objects.register_all()
    admin = context.get_admin_context()
    cell = next(c for c in objects.CellMappingList.get_all(admin) if c.name == "cell1")
    for order in orders:
        with context.target_cell(admin, cell) as cctxt:
            if order["op"] == "create":
                _create_server(cctxt, admin, cell, order, modules=(objects, network_model))
            elif order["op"] == "status":
                instance = objects.Instance.get_by_uuid(cctxt, order["id"])
                stopped = order["status"] == "SHUTOFF"
                instance.vm_state = "stopped" if stopped else "active"
                instance.power_state = 4 if stopped else 1
                instance.save()


def _create_server(
    cctxt: Any, admin: Any, cell: Any, order: dict[str, Any], *, modules: tuple[Any, Any]
) -> None:
    import datetime

    objects, network_model = modules

    flavor = objects.Flavor(
        name="m1.medium",
        flavorid="3",
        memory_mb=4096,
        vcpus=2,
        root_gb=40,
        ephemeral_gb=0,
        swap=0,
        rxtx_factor=1.0,
        vcpu_weight=0,
        disabled=False,
        is_public=True,
        extra_specs={},
        description=None,
    )
    instance = objects.Instance(
        context=cctxt,
        uuid=order["id"],
        project_id=order["project_id"],
        user_id=order["user_id"],
        display_name=order["name"],
        hostname=order["name"],
        vm_state="active",
        power_state=1,
        task_state=None,
        availability_zone=order.get("zone", "nova"),
        metadata={},
        flavor=flavor,
        instance_type_id=1,
        memory_mb=4096,
        vcpus=2,
        root_gb=40,
        ephemeral_gb=0,
        image_ref="00000000-0000-0000-0000-0000000000aa",
        launched_at=datetime.datetime.now(datetime.UTC),
    )
    vif = network_model.VIF(
        id=order["port_id"],
        address=order["mac"],
        network=network_model.Network(
            id=order["network_id"],
            label=order["network_name"],
            subnets=[
                network_model.Subnet(
                    cidr=order["cidr"],
                    gateway=network_model.IP(address=order["gateway"], type="gateway"),
                    ips=[network_model.FixedIP(address=order["ip"])],
                )
            ],
        ),
    )
    instance.info_cache = objects.InstanceInfoCache(network_info=network_model.NetworkInfo([vif]))
    instance.create()
    objects.InstanceMapping(
        context=admin,
        instance_uuid=order["id"],
        cell_mapping=cell,
        project_id=order["project_id"],
        user_id=order["user_id"],
        queued_for_delete=False,
    ).create()


def main() -> None:
    command, *rest = sys.argv[1:]
    if command == "serve":
        serve(rest[0], Path(rest[1]), [int(port) for port in rest[2:]])
    elif command == "init":
        {"neutron": init_neutron, "octavia": init_octavia}[rest[0]](Path(rest[1]))
    elif command == "nova-servers":
        nova_servers(Path(rest[0]), json.load(sys.stdin))
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main()
