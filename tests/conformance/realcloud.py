"""Real Keystone, Neutron, Octavia and Nova on 127.0.0.1, built like `sim.scenario`'s cloud.

    with running_real_cloud(workdir, nodes=3) as cloud:
        cloud.connection("ccm").load_balancer.load_balancers()
        mark = cloud.mark()
        ...
        assert cloud.writes(since=mark) == []

Each service runs from its own venv (installed by `conformance/install.py`, for the release
`$OPENSTACK_RELEASE` names, else the newest pinned one; docs/openstack-releases.md) through
`conformance/stack/services.py`, on sqlite in `workdir`, with an access log the tests read
to count what pyccm called. The cloud: external network `public` (172.24.4.0/22), tenant
network `private` (10.0.0.0/16, VIPs from 10.0.192.0 up), router `router1` between them, and
per node `i` of `sim.scenario` a Neutron port with the node's InternalIP and a Nova server of
the node's name whose network info names that port. `cloud.conf` and `clouds.yaml` are
written like the simulator's.

TLS: each service also listens on HTTPS and on mutual TLS (a client certificate signed by
the session's private CA required; `certificates.py`), and Keystone also under `/identity`.
`RegionOne`'s endpoints are the plain HTTP ones; a second region, `RegionTLS`, lists every
service at a distinct URL per interface (public: HTTPS on 127.0.0.1; internal: mutual TLS;
admin: HTTPS by the name `localhost`), so the access log (`Call.listener`, `Call.host`)
shows which one a client picked. Identities beyond the tenant user (a trust, application
credentials, a token, a user of another domain) are made on first use (`identities()`).

Every process started here is stopped on exit, also when setup fails half-way, and when
the process that started them ends however it ends
(`pyccm.lifetime`): `python -m tests.conformance.realcloud DIR` stops its four services on
Ctrl-C, SIGTERM and SIGHUP, and a SIGKILL of it sends each of them SIGTERM.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
import warnings
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from pyccm import lifetime
from pyccm_sim.scenario import seed_node
from tests.conformance.certificates import TLSFiles, write_certificates
from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
SERVICES_PY = REPO / "conformance" / "stack" / "services.py"
INSTALL_PY = REPO / "conformance" / "install.py"
SERVICES = ("keystone", "neutron", "octavia", "nova")
REGION = "RegionOne"
# The second region: every service at a distinct URL per interface, over TLS.
REGION_TLS = "RegionTLS"
INTERFACES = ("public", "internal", "admin")
# What each interface of RegionTLS is: (listener, host name).
TLS_INTERFACES = {
    "public": ("https", "127.0.0.1"),
    "internal": ("mtls", "127.0.0.1"),
    "admin": ("https", "localhost"),
}
# Each service's catalog path (Keystone's identity endpoint names its version, Nova's too).
CATALOG_PATH = {"keystone": "/v3", "neutron": "", "octavia": "", "nova": "/v2.1"}
CATALOG_TYPE = {
    "keystone": "identity",
    "neutron": "network",
    "octavia": "load-balancer",
    "nova": "compute",
}
ADMIN_PASSWORD = "conformance-admin"
TENANT = {"username": "ccm", "password": "ccm-conformance", "project": "demo"}
START_TIMEOUT = 120.0
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
OCTAVIA_MAX_BODY = 4 * 1024 * 1024
# Every name pyccm may send as `provider` (its default is amphora); all load the noop driver.
PROVIDERS = "amphora:noop here,octavia:noop here,noop_driver:The no-op driver"


def _installer() -> Any:
    """conformance/install.py (standard library only): releases and where their venvs are."""
    spec = importlib.util.spec_from_file_location("conformance_install", INSTALL_PY)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


INSTALL = _installer()
# The newest pinned release, install.py's default: the one `pyccm_sim.openstack` models.
NEWEST = str(INSTALL.DEFAULT_RELEASE)
T = TypeVar("T")


def release() -> str:
    """The OpenStack release under test: $OPENSTACK_RELEASE, else install.py's default."""
    return str(INSTALL.selected_release())


def per_release(expected: Mapping[str, T], of: str | None = None) -> T:
    """What a test expects of release `of` (default: the one under test), from a table that
    states it for every pinned release. Where releases answer differently, a test says what
    each one answers (docs/openstack-releases.md, "Differences"), never the loosest of them;
    a release the table does not state is an error, so a new pin set is measured first."""
    chosen = of or release()
    if chosen not in expected:
        raise LookupError(
            f"no expectation for OpenStack {chosen} (stated: {', '.join(sorted(expected))}): "
            "measure what it answers and add it"
        )
    return expected[chosen]


def venv_root() -> Path:
    return Path(INSTALL.venvs_dir(release()))


@dataclass(frozen=True)
class Quirks:
    """What one release needs beyond the default's setup (docs/openstack-releases.md)."""

    # sqlite files (under the workdir) switched to WAL after their initialisation: Keystone 25
    # leaves a read transaction open after some requests, and in the default rollback journal
    # the next write's commit then fails with 500 `database is locked` (POST /v3/endpoints).
    wal: tuple[str, ...] = ()
    # Extra environment of one service's server process. Nova 29 monkey-patches with eventlet
    # on import unless told not to; the threaded server then answers one request and hangs
    # (pyccm's GET /servers/detail timed out).
    env: dict[str, dict[str, str]] = field(default_factory=dict)


QUIRKS = {
    "2024.1": Quirks(
        wal=("keystone/keystone.sqlite",),
        env={"nova": {"OS_NOVA_DISABLE_EVENTLET_PATCHING": "1"}},
    ),
    # Nova 31 still monkey-patches on import (nova/monkey_patch.py); Keystone's WAL is
    # carried over from 2024.1, not measured without.
    "2025.1": Quirks(
        wal=("keystone/keystone.sqlite",),
        env={"nova": {"OS_NOVA_DISABLE_EVENTLET_PATCHING": "1"}},
    ),
}


def quirks() -> Quirks:
    return QUIRKS.get(release(), Quirks())


def venv_python(service: str) -> Path:
    return venv_root() / service / "bin" / "python"


@dataclass(frozen=True)
class Call:
    service: str
    method: str
    path: str
    query: str
    status: int
    user_agent: str
    # The listener the request arrived on (http, https, mtls), its port, and the Host header.
    listener: str = "http"
    port: int = 0
    host: str = ""


@dataclass(frozen=True)
class Identities:
    """Credentials made in the real Keystone for the authentication tests (secrets included:
    the tests check that none of them reaches pyccm's output)."""

    project_id: str
    user_id: str
    # A trustee user in its own domain (as Magnum makes one per cluster) and the trust the
    # tenant user gave it on its project, impersonating, with the tenant's roles.
    trustee_id: str
    trustee_password: str
    trust_id: str
    # An application credential of the tenant user on its project.
    application_credential_id: str
    application_credential_name: str
    application_credential_secret: str
    # A project-scoped token of the tenant user.
    token: str
    # A user of a domain other than Default, with the tenant's roles on its project.
    other_domain: str
    other_domain_id: str
    other_username: str
    other_password: str

    def secrets(self) -> tuple[str, ...]:
        return (
            TENANT["password"],
            self.trustee_password,
            self.application_credential_secret,
            self.token,
            self.other_password,
        )


@dataclass
class Seeded:
    project_id: str = ""
    user_id: str = ""
    network_id: str = ""
    subnet_id: str = ""
    external_network_id: str = ""
    external_subnet_id: str = ""
    router_id: str = ""
    servers: dict[str, str] = field(default_factory=dict)


class RealCloud:
    """The running services, their configs, and operator-side controls for tests."""

    def __init__(
        self,
        workdir: Path,
        ports: dict[str, int],
        *,
        https_ports: dict[str, int],
        mtls_ports: dict[str, int],
        tls: TLSFiles,
    ) -> None:
        self.workdir = workdir
        self.ports = ports
        self.https_ports = https_ports
        self.mtls_ports = mtls_ports
        self.tls = tls
        self.auth_url = f"http://127.0.0.1:{ports['keystone']}/v3"
        self.clouds_yaml_path = workdir / "clouds.yaml"
        self.cloud_conf_path = workdir / "cloud.conf"
        self.seeded = Seeded()
        self._connections: dict[str, Any] = {}
        self._identities: Identities | None = None

    # --- listeners ---------------------------------------------------------------------------
    def port(self, service: str, listener: str) -> int:
        return {"http": self.ports, "https": self.https_ports, "mtls": self.mtls_ports}[listener][
            service
        ]

    def root(self, service: str, listener: str, host: str = "127.0.0.1") -> str:
        """`scheme://host:port` of one listener of a service."""
        scheme = "http" if listener == "http" else "https"
        return f"{scheme}://{host}:{self.port(service, listener)}"

    def region_tls_url(self, service: str, interface: str) -> str:
        """The catalog URL of `service` for `interface` in RegionTLS."""
        listener, host = TLS_INTERFACES[interface]
        return self.root(service, listener, host) + CATALOG_PATH[service]

    # --- identities --------------------------------------------------------------------------
    def identities(self) -> Identities:
        """The trust, application credentials, token and other-domain user, made once."""
        if self._identities is None:
            self._identities = _create_identities(self)
        return self._identities

    # --- clients -----------------------------------------------------------------------------
    def connection(self, cloud: str = "ccm") -> Any:
        if cloud not in self._connections:
            from openstack import config, connection

            loader = config.OpenStackConfig(
                config_files=[str(self.clouds_yaml_path)],
                vendor_files=[],
                secure_files=[],
                load_envvars=False,
            )
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", category=PendingDeprecationWarning)
                self._connections[cloud] = connection.Connection(config=loader.get_one(cloud=cloud))
        return self._connections[cloud]

    # --- access logs -------------------------------------------------------------------------
    def mark(self) -> int:
        return len(self._all_calls())

    def calls(self, since: int = 0) -> list[Call]:
        return self._all_calls()[since:]

    def writes(self, since: int = 0) -> list[Call]:
        return [c for c in self.calls(since) if c.method in WRITES and c.service != "keystone"]

    def _all_calls(self) -> list[Call]:
        entries: list[tuple[float, int, Call]] = []
        for service in SERVICES:
            path = self.workdir / f"{service}-access.log"
            if not path.exists():
                continue
            for line in path.read_text().splitlines():
                if not line.endswith("}"):
                    continue  # a line being written
                raw = json.loads(line)
                call = Call(
                    service=service,
                    method=raw["method"],
                    path=raw["path"],
                    query=raw["query"],
                    status=raw["status"],
                    user_agent=raw["user_agent"],
                    listener=raw.get("listener", "http"),
                    port=raw.get("port", 0),
                    host=raw.get("host", ""),
                )
                entries.append((raw["time"], len(entries), call))
        return [call for _, _, call in sorted(entries)]

    # --- servers -----------------------------------------------------------------------------
    def add_servers(
        self, servers: list[tuple[str, str]], zone: str = "nova", *, ports: bool = True
    ) -> list[str]:
        """A Neutron port with each fixed IP and a Nova server of each name naming it
        (`ports=False`: servers only, whose network info names a port Neutron never had:
        enough for Nova's own lists, and far quicker by the thousand)."""
        network = self.connection("admin").network
        orders = []
        for name, ip in servers:
            server_id = str(uuid.uuid4())
            port_id, mac = str(uuid.uuid4()), "fa:16:3e:00:00:01"
            if ports:
                port = network.create_port(
                    network_id=self.seeded.network_id,
                    project_id=self.seeded.project_id,
                    fixed_ips=[{"subnet_id": self.seeded.subnet_id, "ip_address": ip}],
                    device_owner=f"compute:{zone}",
                    device_id=server_id,
                    name=f"{name}-port",
                )
                port_id, mac = port.id, port.mac_address
            self.seeded.servers[name] = server_id
            orders.append(
                {
                    "op": "create",
                    "id": server_id,
                    "name": name,
                    "zone": zone,
                    "project_id": self.seeded.project_id,
                    "user_id": self.seeded.user_id,
                    "port_id": port_id,
                    "mac": mac,
                    "network_id": self.seeded.network_id,
                    "network_name": "private",
                    "cidr": "10.0.0.0/16",
                    "gateway": "10.0.0.1",
                    "ip": ip,
                }
            )
        self._nova(orders)
        return [self.seeded.servers[name] for name, _ in servers]

    def set_server_status(self, name: str, status: str) -> None:
        self._nova([{"op": "status", "id": self.seeded.servers[name], "status": status}])

    def _nova(self, orders: list[dict[str, Any]]) -> None:
        _run(
            [str(venv_python("nova")), str(SERVICES_PY), "nova-servers", str(self.workdir)],
            self.workdir / "nova-servers.log",
            stdin=json.dumps(orders),
        )

    # --- Octavia faults ----------------------------------------------------------------------
    def force_error(self, lb_name_pattern: str) -> None:
        with (self.workdir / "octavia" / "errors").open("a") as errors:
            errors.write(lb_name_pattern + "\n")

    def clear_errors(self) -> None:
        (self.workdir / "octavia" / "errors").unlink(missing_ok=True)

    @contextmanager
    def holding(self, lb_name_pattern: str) -> Iterator[None]:
        """Load balancers whose name matches stay PENDING_* for the block (the settler skips
        them), so a test can meet a busy one without racing the settle delay."""
        holds = self.workdir / "octavia" / "holds"
        holds.write_text(lb_name_pattern + "\n")
        try:
            yield
        finally:
            holds.unlink(missing_ok=True)


# --- starting it ---------------------------------------------------------------------------------


@contextmanager
def running_real_cloud(
    workdir: Path, *, nodes: int = 3, settle_delay_s: float = 0.5
) -> Iterator[RealCloud]:
    missing = [s for s in SERVICES if not venv_python(s).exists()]
    if missing:
        raise RuntimeError(
            f"no venv for {', '.join(missing)} under {venv_root()}: run "
            f"`make conformance OPENSTACK_RELEASE={release()}`"
        )
    ports = {service: free_port() for service in SERVICES}
    cloud = RealCloud(
        workdir,
        ports,
        https_ports={service: free_port() for service in SERVICES},
        mtls_ports={service: free_port() for service in SERVICES},
        tls=write_certificates(workdir / "tls"),
    )
    _write_configs(workdir, ports)
    with ExitStack() as stack:
        _initialise(workdir, ports)
        for database in quirks().wal:
            with closing(sqlite3.connect(workdir / database)) as db:
                db.execute("PRAGMA journal_mode=WAL")
        env = dict(os.environ, PYTHONWARNINGS="ignore", PYCCM_SETTLE_DELAY_S=str(settle_delay_s))
        for service in SERVICES:
            own_env = {**env, **quirks().env.get(service, {})}
            listeners = [cloud.port(service, name) for name in ("http", "https", "mtls")]
            stack.enter_context(_server(service, workdir, listeners, own_env))
            if service == "keystone":
                _create_accounts(cloud)
        _build_cloud(cloud, nodes)
        yield cloud


def _run(command: list[str], log: Path, *, stdin: str | None = None) -> None:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    with log.open("ab") as out:
        done = subprocess.run(
            command,
            input=None if stdin is None else stdin.encode(),
            stdout=out,
            stderr=out,
            env=env,
            check=False,
            cwd=log.parent,
            **lifetime.tied(),
        )
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"{' '.join(command[:4])} failed ({done.returncode}):\n{tail}")


@contextmanager
def _server(service: str, workdir: Path, ports: list[int], env: dict[str, str]) -> Iterator[None]:
    """The service on its listeners: plain HTTP on ports[0], HTTPS and mutual TLS on the rest
    (all bound before the HTTP one answers)."""
    log = (workdir / f"{service}.log").open("ab")
    command = [str(venv_python(service)), str(SERVICES_PY), "serve", service, str(workdir)]
    process = lifetime.spawn(
        command + [str(port) for port in ports],
        stdout=log,
        stderr=log,
        env=env,
        cwd=workdir,
    )
    try:
        _wait_until_serving(service, ports[0], process, workdir)
        yield
    finally:
        stop_process(process)
        log.close()


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 10 s: nothing this module starts outlives its test."""
    lifetime.stop(process, timeout=10)


def _wait_until_serving(
    service: str, port: int, process: subprocess.Popen[bytes], workdir: Path
) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = (workdir / f"{service}.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{service} exited with {process.returncode}:\n{tail}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).close()
            return
        except urllib.error.HTTPError:
            return  # any answer (300, 401) means it serves
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{service} did not answer on port {port} within {START_TIMEOUT:.0f}s")


# --- configuration -------------------------------------------------------------------------------


def _authtoken(user: str, keystone: int) -> str:
    return f"""
[keystone_authtoken]
www_authenticate_uri = http://127.0.0.1:{keystone}
auth_url = http://127.0.0.1:{keystone}
auth_type = password
username = {user}
password = {user}pass
project_name = service
user_domain_name = Default
project_domain_name = Default
region_name = {REGION}
"""


def _service_auth(section: str, user: str, keystone: int) -> str:
    return f"""
[{section}]
auth_url = http://127.0.0.1:{keystone}
auth_type = password
username = {user}
password = {user}pass
project_name = service
user_domain_name = Default
project_domain_name = Default
region_name = {REGION}
"""


def _write_configs(workdir: Path, ports: dict[str, int]) -> None:
    ks = ports["keystone"]
    for service in SERVICES:
        (workdir / service).mkdir(parents=True, exist_ok=True)
    (workdir / "keystone" / "keystone.conf").write_text(
        f"""[DEFAULT]
[database]
connection = sqlite:///{workdir}/keystone/keystone.sqlite
[token]
provider = fernet
expiration = 86400
[fernet_tokens]
key_repository = {workdir}/keystone/fernet-keys
[fernet_receipts]
key_repository = {workdir}/keystone/fernet-keys
[credential]
key_repository = {workdir}/keystone/credential-keys
[identity]
password_hash_rounds = 4
"""
    )
    paste = venv_root() / "neutron" / "etc" / "neutron" / "api-paste.ini"
    (workdir / "neutron" / "neutron.conf").write_text(
        f"""[DEFAULT]
core_plugin = ml2
service_plugins = router
auth_strategy = keystone
allow_overlapping_ips = True
api_paste_config = {paste}
transport_url = fake:/
notify_nova_on_port_status_changes = False
notify_nova_on_port_data_changes = False
api_workers = 1
rpc_workers = 0
[database]
connection = sqlite:///{workdir}/neutron/neutron.sqlite
[oslo_concurrency]
lock_path = {workdir}/neutron/lock
[agent]
report_interval = 0
[ml2]
type_drivers = flat,vlan,vxlan
tenant_network_types = vxlan
mechanism_drivers =
extension_drivers = port_security
[ml2_type_flat]
flat_networks = public
[ml2_type_vxlan]
vni_ranges = 1:1000
[securitygroup]
enable_security_group = True
"""
        + _authtoken("neutron", ks)
    )
    (workdir / "octavia" / "octavia.conf").write_text(
        f"""[DEFAULT]
transport_url = fake://
[api_settings]
bind_host = 127.0.0.1
bind_port = {ports["octavia"]}
auth_strategy = keystone
enabled_provider_drivers = {PROVIDERS}
default_provider_driver = amphora
api_v2_enabled = True
[database]
connection = sqlite:///{workdir}/octavia/octavia.sqlite
pool_timeout =
[oslo_messaging]
topic = octavia_prov
[oslo_middleware]
# The default, 112 KiB, refuses (413) a load balancer or batch member update of more than
# ~1,000 members: a large cluster's Octavia must raise it (pyccm's README says so).
max_request_body_size = {OCTAVIA_MAX_BODY}
[controller_worker]
network_driver = allowed_address_pairs_driver
compute_driver = compute_noop_driver
amphora_driver = amphora_noop_driver
image_driver = image_noop_driver
volume_driver = volume_noop_driver
[certificates]
cert_manager = noop_cert_manager
[neutron]
region_name = {REGION}
valid_interfaces = public
endpoint_override = http://127.0.0.1:{ports["neutron"]}
"""
        + _authtoken("octavia", ks).replace(
            "[keystone_authtoken]", "[keystone_authtoken]\nservice_token_roles_required = True"
        )
        + _service_auth("service_auth", "octavia", ks)
    )
    nova_paste = venv_root() / "nova" / "etc" / "nova" / "api-paste.ini"
    shutil.copy(nova_paste, workdir / "nova" / "api-paste.ini")
    (workdir / "nova" / "nova.conf").write_text(
        f"""[DEFAULT]
transport_url = fake://
[api]
auth_strategy = keystone
[api_database]
connection = sqlite:///{workdir}/nova/nova_api.sqlite
[database]
connection = sqlite:///{workdir}/nova/nova.sqlite
[oslo_concurrency]
lock_path = {workdir}/nova/lock
[placement]
auth_type = none
endpoint_override = http://127.0.0.1:1
[glance]
endpoint_override = http://127.0.0.1:1
[neutron]
endpoint_override = http://127.0.0.1:{ports["neutron"]}
"""
        + _authtoken("nova", ks)
        + _service_auth("neutron", "nova", ks).replace("[neutron]", "")
    )


def _initialise(workdir: Path, ports: dict[str, int]) -> None:
    """Every service's database, in parallel (the Keystone and Nova chains in order)."""
    uid, gid = str(os.getuid()), str(os.getgid())
    keystone_conf = str(workdir / "keystone" / "keystone.conf")
    manage = str(venv_root() / "keystone" / "bin" / "keystone-manage")
    identity = f"http://127.0.0.1:{ports['keystone']}/v3/"
    keystone = [
        [manage, "--config-file", keystone_conf, "db_sync"],
        [
            manage,
            "--config-file",
            keystone_conf,
            "fernet_setup",
            "--keystone-user",
            uid,
            "--keystone-group",
            gid,
        ],
        [
            manage,
            "--config-file",
            keystone_conf,
            "credential_setup",
            "--keystone-user",
            uid,
            "--keystone-group",
            gid,
        ],
        [
            manage,
            "--config-file",
            keystone_conf,
            "bootstrap",
            "--bootstrap-password",
            ADMIN_PASSWORD,
            "--bootstrap-region-id",
            REGION,
            "--bootstrap-public-url",
            identity,
            "--bootstrap-internal-url",
            identity,
            "--bootstrap-admin-url",
            identity,
        ],
    ]
    nova_conf = str(workdir / "nova" / "nova.conf")
    nova_manage = str(venv_root() / "nova" / "bin" / "nova-manage")
    cell0 = f"sqlite:///{workdir}/nova/nova_cell0.sqlite"
    nova = [
        [nova_manage, "--config-file", nova_conf, "api_db", "sync"],
        [
            nova_manage,
            "--config-file",
            nova_conf,
            "cell_v2",
            "map_cell0",
            "--database_connection",
            cell0,
        ],
        [nova_manage, "--config-file", nova_conf, "db", "sync"],
        [nova_manage, "--config-file", nova_conf, "cell_v2", "create_cell", "--name", "cell1"],
    ]
    chains = {
        "keystone": keystone,
        "nova": nova,
        "neutron": [
            [str(venv_python("neutron")), str(SERVICES_PY), "init", "neutron", str(workdir)]
        ],
        "octavia": [
            [str(venv_python("octavia")), str(SERVICES_PY), "init", "octavia", str(workdir)]
        ],
    }

    def run_chain(service: str) -> None:
        for command in chains[service]:
            _run(command, workdir / f"{service}-init.log")

    with ThreadPoolExecutor(max_workers=4) as pool:
        for future in [pool.submit(run_chain, s) for s in SERVICES]:
            future.result()


def _create_accounts(cloud: RealCloud) -> None:
    """Catalog, projects, roles and users; then the clouds.yaml the tests and pyccm use."""
    ports = cloud.ports
    admin_cloud = {
        "auth": {
            "auth_url": cloud.auth_url,
            "username": "admin",
            "password": ADMIN_PASSWORD,
            "project_name": "admin",
            "user_domain_name": "Default",
            "project_domain_name": "Default",
        },
        "region_name": REGION,
        "identity_api_version": 3,
        "interface": "public",
    }
    tenant_cloud = {
        **admin_cloud,
        "auth": {
            **admin_cloud["auth"],  # type: ignore[dict-item]
            "username": TENANT["username"],
            "password": TENANT["password"],
            "project_name": TENANT["project"],
        },
    }
    cloud.clouds_yaml_path.write_text(
        yaml.safe_dump({"clouds": {"admin": admin_cloud, "ccm": tenant_cloud}})
    )
    identity = cloud.connection("admin").identity
    endpoints = {
        "load-balancer": ("octavia", f"http://127.0.0.1:{ports['octavia']}"),
        "network": ("neutron", f"http://127.0.0.1:{ports['neutron']}"),
        "compute": ("nova", f"http://127.0.0.1:{ports['nova']}/v2.1"),
    }
    for service_type, (name, url) in endpoints.items():
        service = identity.create_service(name=name, type=service_type)
        for interface in INTERFACES:
            identity.create_endpoint(
                service_id=service.id, interface=interface, url=url, region_id=REGION
            )
    _create_region_tls(cloud, identity)
    domain = identity.find_domain("default")
    projects = {
        name: identity.create_project(name=name, domain_id=domain.id)
        for name in ("service", TENANT["project"])
    }
    roles = {role.name: role for role in identity.roles()}
    for name in ("member", "reader", "service", "load-balancer_member", "admin"):
        if name not in roles:
            roles[name] = identity.create_role(name=name)
    for user in ("neutron", "octavia", "nova"):
        account = identity.create_user(name=user, password=f"{user}pass", domain_id=domain.id)
        for role in ("admin", "service"):
            identity.assign_project_role_to_user(projects["service"], account, roles[role])
    tenant = identity.create_user(
        name=TENANT["username"], password=TENANT["password"], domain_id=domain.id
    )
    for role in ("member", "load-balancer_member"):
        identity.assign_project_role_to_user(projects[TENANT["project"]], tenant, roles[role])
    cloud.seeded.project_id = projects[TENANT["project"]].id
    cloud.seeded.user_id = tenant.id
    # Tokens and catalogs cached before the endpoints existed must not be reused.
    cloud._connections.clear()


def _create_region_tls(cloud: RealCloud, identity: Any) -> None:
    """RegionTLS: every service (identity included) at a distinct URL per interface. The
    services' own keystonemiddleware and service users name RegionOne, so they keep using
    its plain HTTP endpoints."""
    identity.create_region(id=REGION_TLS)
    services = {s.type: s for s in identity.services()}
    for name, service_type in CATALOG_TYPE.items():
        for interface in INTERFACES:
            identity.create_endpoint(
                service_id=services[service_type].id,
                interface=interface,
                url=cloud.region_tls_url(name, interface),
                region_id=REGION_TLS,
            )


def _create_identities(cloud: RealCloud) -> Identities:
    """A trustee and the tenant's trust to it, application credentials and a token of the
    tenant user, and a user of another domain (openstacksdk, as admin and as the tenant)."""
    admin = cloud.connection("admin").identity
    tenant = cloud.connection("ccm")
    project_id, user_id = cloud.seeded.project_id, cloud.seeded.user_id
    roles = [{"name": name} for name in ("member", "load-balancer_member")]
    trustees = admin.create_domain(name="pyccm-trustees", description="as Magnum's")
    trustee_password = "trustee-" + uuid.uuid4().hex
    trustee = admin.create_user(
        name=f"trustee-{uuid.uuid4().hex[:8]}", password=trustee_password, domain_id=trustees.id
    )
    trust = tenant.identity.create_trust(
        trustor_user_id=user_id,
        trustee_user_id=trustee.id,
        project_id=project_id,
        roles=roles,
        impersonation=True,
    )
    secret = "appcred-" + uuid.uuid4().hex
    credential = tenant.identity.create_application_credential(
        user=user_id, name="pyccm-conformance", secret=secret
    )
    other = admin.create_domain(name="pyccm-elsewhere")
    other_password = "elsewhere-" + uuid.uuid4().hex
    other_user = admin.create_user(name="ccm", password=other_password, domain_id=other.id)
    by_name = {role.name: role for role in admin.roles()}
    for role in roles:
        admin.assign_project_role_to_user(project_id, other_user, by_name[role["name"]])
    return Identities(
        project_id=project_id,
        user_id=user_id,
        trustee_id=trustee.id,
        trustee_password=trustee_password,
        trust_id=trust.id,
        application_credential_id=credential.id,
        application_credential_name=credential.name,
        application_credential_secret=secret,
        token=tenant.auth_token,
        other_domain=other.name,
        other_domain_id=other.id,
        other_username=other_user.name,
        other_password=other_password,
    )


def _build_cloud(cloud: RealCloud, nodes: int) -> None:
    network = cloud.connection("admin").network
    seeded = cloud.seeded
    public = network.create_network(
        name="public",
        is_router_external=True,
        provider_network_type="flat",
        provider_physical_network="public",
    )
    public_subnet = network.create_subnet(
        network_id=public.id,
        name="public-subnet",
        ip_version=4,
        cidr="172.24.4.0/22",
        gateway_ip="172.24.4.1",
        is_dhcp_enabled=False,
    )
    # Neutron's default quota (10 groups) is a small project's; the session's tests make and
    # leave more (managed security groups, takeovers), and a 409 Quota exceeded failed the
    # last of them in a full session.
    network.update_quota(seeded.project_id, security_groups=200, security_group_rules=2000)
    private = network.create_network(name="private", project_id=seeded.project_id)
    private_subnet = network.create_subnet(
        network_id=private.id,
        project_id=seeded.project_id,
        name="private-subnet",
        ip_version=4,
        cidr="10.0.0.0/16",
        gateway_ip="10.0.0.1",
        allocation_pools=[{"start": "10.0.192.0", "end": "10.0.255.254"}],
    )
    router = network.create_router(
        name="router1",
        project_id=seeded.project_id,
        external_gateway_info={"network_id": public.id},
    )
    network.add_interface_to_router(router, subnet=private_subnet.id)
    seeded.network_id, seeded.subnet_id = private.id, private_subnet.id
    seeded.external_network_id, seeded.external_subnet_id = public.id, public_subnet.id
    seeded.router_id = router.id
    cloud.add_servers([(seed_node(i).name, seed_node(i).internal_ip) for i in range(nodes)])
    cloud.cloud_conf_path.write_text(
        "\n".join(
            [
                "[Global]",
                f"auth-url = {cloud.auth_url}",
                f"username = {TENANT['username']}",
                f"password = {TENANT['password']}",
                f"tenant-name = {TENANT['project']}",
                "domain-name = Default",
                f"region = {REGION}",
                "",
                "[LoadBalancer]",
                f"floating-network-id = {public.id}",
                f"subnet-id = {private_subnet.id}",
                "",
                "[Route]",
                f"router-id = {router.id}",
                "",
            ]
        )
    )
    for path in (cloud.cloud_conf_path, cloud.clouds_yaml_path):
        path.chmod(0o600)


if __name__ == "__main__":  # a stack to poke at by hand: python -m tests.conformance.realcloud DIR
    lifetime.stop_on_signals()
    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    with running_real_cloud(target) as running:
        print(f"ready: OS_CLIENT_CONFIG_FILE={running.clouds_yaml_path} (clouds admin, ccm)")
        print(f"cloud.conf: {running.cloud_conf_path}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except lifetime.Signalled:
            pass  # Ctrl-C, SIGTERM, SIGHUP: the `with` stops the services
