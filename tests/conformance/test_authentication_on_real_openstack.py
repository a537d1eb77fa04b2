"""Every documented way to authenticate, on the real Keystone, over plain HTTP and TLS.

Each test writes one `cloud.conf` and runs the real one-shot command `pyccm gc --dry-run
--cluster-id X --cloud-config FILE`: it must authenticate, read the catalog and list the
cloud (exit 0), or refuse with exactly one line on stderr, no traceback (exit 1). What it
did is read from the services' own access logs: the token request Keystone answered (on
which listener, at which path) and the listing calls Octavia and Neutron answered (on which
listener, by which host name), so a test tells RegionOne's plain HTTP endpoints from
RegionTLS's public (HTTPS), internal (mutual TLS) and admin (HTTPS as `localhost`) ones. No
run may print a password, application credential secret or token.

The identities (a trust to a trustee of another domain, application credentials, a token,
a user of another domain) are made in the real Keystone (`RealCloud.identities`); the
deployers' templates are in `deployers/`.
"""

from __future__ import annotations

import os
import string
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from pyccm import lifetime
from tests.conformance.realcloud import (
    REGION,
    REGION_TLS,
    TENANT,
    TLS_INTERFACES,
    Call,
    Identities,
    RealCloud,
)

pytestmark = pytest.mark.conformance

CLUSTER = "auth-conformance"
DEPLOYERS = Path(__file__).parent / "deployers"
# User agents of the services' own Keystone traffic (keystonemiddleware validating pyccm's
# token, and its service user's token), which is not pyccm's.
SERVICE_AGENTS = ("keystonemiddleware", "python-keystoneclient")
# The listing calls of `gc --dry-run`: load balancers in Octavia; security groups and the
# routers' claims in Neutron.
LISTED = ("octavia", "neutron")


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str
    calls: list[Call]

    def pyccm(self, service: str) -> list[Call]:
        """The calls pyccm made to `service` during the run."""
        return [
            c
            for c in self.calls
            if c.service == service and not any(a in c.user_agent for a in SERVICE_AGENTS)
        ]

    def tokens(self) -> list[Call]:
        """pyccm's token requests Keystone granted."""
        return [
            c
            for c in self.pyccm("keystone")
            if c.method == "POST" and c.path.endswith("/auth/tokens") and c.status == 201
        ]


@pytest.fixture(scope="module")
def identities(real_cloud: RealCloud) -> Identities:
    return real_cloud.identities()


def gc(real_cloud: RealCloud, conf: Path) -> Run:
    """`pyccm gc --dry-run` with `conf`; fails the test if any secret is in its output."""
    mark = real_cloud.mark()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("OS_") and k.lower() not in ("http_proxy", "https_proxy")
    }
    command = [sys.executable, "-m", "pyccm", "gc", "--dry-run", "--cluster-id", CLUSTER]
    done = subprocess.run(
        [*command, "--cloud-config", str(conf)],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
        check=False,
        **lifetime.tied(),
    )
    run = Run(done.returncode, done.stdout, done.stderr, real_cloud.calls(mark))
    for secret in real_cloud.identities().secrets():
        assert secret not in run.stdout + run.stderr, "a secret in pyccm's output"
    return run


def cloud_conf(real_cloud: RealCloud, path: Path, **global_: str) -> Path:
    """A cloud.conf with these `[Global]` keys (`auth_url` for `auth-url`) and the test
    cloud's network settings."""
    seeded = real_cloud.seeded
    lines = ["[Global]"]
    lines += [f"{key.replace('_', '-')} = {value}" for key, value in global_.items()]
    lines += [
        "",
        "[LoadBalancer]",
        f"floating-network-id = {seeded.external_network_id}",
        f"subnet-id = {seeded.subnet_id}",
        "",
        "[Route]",
        f"router-id = {seeded.router_id}",
        "",
    ]
    path.write_text("\n".join(lines))
    path.chmod(0o600)
    return path


def password(**more: str) -> dict[str, str]:
    """The tenant user's password credentials (by name) and project (by name)."""
    return {
        "username": TENANT["username"],
        "password": TENANT["password"],
        "domain_name": "Default",
        "tenant_name": TENANT["project"],
        "region": REGION,
        **more,
    }


def check_worked(
    run: Run,
    *,
    keystone: tuple[str, str] = ("http", "/v3/auth/tokens"),
    listener: str = "http",
    host: str = "127.0.0.1",
) -> None:
    """Exit 0; Keystone granted pyccm's token on `keystone` (listener, path); and every
    listing call reached Octavia and Neutron on `listener` by the name `host`."""
    assert run.code == 0, f"exit {run.code}: {run.stderr.strip()}"
    assert "orphaned resource(s)" in run.stdout
    granted = {(c.listener, c.path) for c in run.tokens()}
    assert granted == {keystone}, f"token requests granted: {granted or 'none'}"
    for service in LISTED:
        calls = run.pyccm(service)
        assert calls, f"pyccm called no {service}"
        where = {(c.listener, c.host.rsplit(":", 1)[0]) for c in calls}
        assert where == {(listener, host)}, f"{service} called on {where}"
        assert all(c.status < 400 for c in calls), [(c.path, c.status) for c in calls]


def check_refused(run: Run, *named: str) -> None:
    """Exit 1 with exactly one line on stderr naming each of `named`; no traceback, and
    nothing listed."""
    assert run.code == 1, f"exit {run.code}: {run.stderr.strip()}"
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert "Traceback" not in run.stderr
    for text in named:
        assert text in lines[0], f"{text!r} not in {lines[0]!r}"
    assert not [c for s in LISTED for c in run.pyccm(s)]


# --- password: users, projects and domains by name or id --------------------------------------


@pytest.mark.parametrize(
    "form",
    [
        pytest.param(password(), id="username+domain-name, tenant-name"),
        pytest.param(
            password(domain_name="", user_domain_name="Default", tenant_domain_name="Default"),
            id="username+user-domain-name, tenant-name+tenant-domain-name",
        ),
        pytest.param(
            password(domain_name="", user_domain_id="default", tenant_domain_id="default"),
            id="username+user-domain-id, tenant-name+tenant-domain-id",
        ),
        pytest.param(
            password(domain_name="", domain_id="default"), id="username+domain-id, tenant-name"
        ),
    ],
)
def test_password_by_user_name(
    real_cloud: RealCloud, identities: Identities, tmp_path: Path, form: dict[str, str]
) -> None:
    conf = cloud_conf(
        real_cloud,
        tmp_path / "cloud.conf",
        auth_url=real_cloud.auth_url,
        **{k: v for k, v in form.items() if v},
    )
    check_worked(gc(real_cloud, conf))


def test_password_by_user_id_and_tenant_id(
    real_cloud: RealCloud, identities: Identities, tmp_path: Path
) -> None:
    conf = cloud_conf(
        real_cloud,
        tmp_path / "cloud.conf",
        auth_url=real_cloud.auth_url,
        user_id=identities.user_id,
        password=TENANT["password"],
        tenant_id=identities.project_id,
        region=REGION,
    )
    check_worked(gc(real_cloud, conf))


def test_password_of_a_user_in_another_domain(
    real_cloud: RealCloud, identities: Identities, tmp_path: Path
) -> None:
    """A user named like the tenant user, in another domain, with its own password: only
    its domain makes the name resolve to it, on a project of the Default domain."""
    conf = cloud_conf(
        real_cloud,
        tmp_path / "cloud.conf",
        auth_url=real_cloud.auth_url,
        username=identities.other_username,
        password=identities.other_password,
        user_domain_name=identities.other_domain,
        tenant_name=TENANT["project"],
        tenant_domain_name="Default",
        region=REGION,
    )
    check_worked(gc(real_cloud, conf))


# --- auth-url: with and without the API version, under a path prefix --------------------------


@pytest.mark.parametrize(
    ("suffix", "token_path"),
    [
        pytest.param("/v3", "/v3/auth/tokens", id="/v3"),
        pytest.param("/v3/", "/v3/auth/tokens", id="/v3/"),
        pytest.param("", "/v3/auth/tokens", id="no version (discovery)"),
        pytest.param("/", "/v3/auth/tokens", id="no version, trailing slash (discovery)"),
        pytest.param("/identity", "/identity/v3/auth/tokens", id="/identity (discovery)"),
        pytest.param("/identity/v3", "/identity/v3/auth/tokens", id="/identity/v3"),
    ],
)
def test_auth_url_forms(
    real_cloud: RealCloud, identities: Identities, tmp_path: Path, suffix: str, token_path: str
) -> None:
    auth_url = real_cloud.root("keystone", "http") + suffix
    conf = cloud_conf(real_cloud, tmp_path / "cloud.conf", auth_url=auth_url, **password())
    check_worked(gc(real_cloud, conf), keystone=("http", token_path))


# --- trust, application credential, token -----------------------------------------------------


def test_trust_with_trustee_keys(
    real_cloud: RealCloud, identities: Identities, tmp_path: Path
) -> None:
    conf = cloud_conf(
        real_cloud,
        tmp_path / "cloud.conf",
        auth_url=real_cloud.auth_url,
        trustee_id=identities.trustee_id,
        trustee_password=identities.trustee_password,
        trust_id=identities.trust_id,
        region=REGION,
    )
    check_worked(gc(real_cloud, conf))


def test_trust_in_magnums_form(
    real_cloud: RealCloud, identities: Identities, tmp_path: Path
) -> None:
    """user-id and password are the trustee's, as Magnum writes them; upstream falls back
    to them when trustee-id and trustee-password are not set."""
    conf = cloud_conf(
        real_cloud,
        tmp_path / "cloud.conf",
        auth_url=real_cloud.auth_url,
        user_id=identities.trustee_id,
        password=identities.trustee_password,
        trust_id=identities.trust_id,
        region=REGION,
    )
    check_worked(gc(real_cloud, conf))


@pytest.mark.parametrize(
    "by",
    [
        pytest.param("id", id="by id"),
        pytest.param("name+user-id", id="by name with user-id"),
        pytest.param("name+username", id="by name with username and user-domain-name"),
    ],
)
def test_application_credential(
    real_cloud: RealCloud, identities: Identities, tmp_path: Path, by: str
) -> None:
    keys = {"application_credential_secret": identities.application_credential_secret}
    if by == "id":
        keys["application_credential_id"] = identities.application_credential_id
    else:
        keys["application_credential_name"] = identities.application_credential_name
    if by == "name+user-id":
        keys["user_id"] = identities.user_id
    if by == "name+username":
        keys |= {"username": TENANT["username"], "user_domain_name": "Default"}
    conf = cloud_conf(
        real_cloud, tmp_path / "cloud.conf", auth_url=real_cloud.auth_url, region=REGION, **keys
    )
    check_worked(gc(real_cloud, conf))


def test_token(real_cloud: RealCloud, identities: Identities, tmp_path: Path) -> None:
    conf = cloud_conf(
        real_cloud,
        tmp_path / "cloud.conf",
        auth_url=real_cloud.auth_url,
        token=identities.token,
        tenant_id=identities.project_id,
        region=REGION,
    )
    check_worked(gc(real_cloud, conf))


# --- region and os-endpoint-type --------------------------------------------------------------


def test_region_one_by_default_interface(
    real_cloud: RealCloud, identities: Identities, tmp_path: Path
) -> None:
    conf = cloud_conf(
        real_cloud, tmp_path / "cloud.conf", auth_url=real_cloud.auth_url, **password()
    )
    check_worked(gc(real_cloud, conf), listener="http")


@pytest.mark.parametrize("interface", list(TLS_INTERFACES))
def test_region_and_endpoint_type_pick_the_endpoint(
    real_cloud: RealCloud, identities: Identities, tmp_path: Path, interface: str
) -> None:
    """RegionTLS lists each service three times: public (HTTPS), internal (mutual TLS),
    admin (HTTPS by the name localhost); the listing calls go to the one asked for."""
    tls = real_cloud.tls
    conf = cloud_conf(
        real_cloud,
        tmp_path / "cloud.conf",
        auth_url=real_cloud.auth_url,
        **password(
            region=REGION_TLS,
            os_endpoint_type=interface,
            ca_file=str(tls.ca),
            cert_file=str(tls.client_cert),
            key_file=str(tls.client_key),
        ),
    )
    listener, host = TLS_INTERFACES[interface]
    check_worked(gc(real_cloud, conf), listener=listener, host=host)


# --- TLS --------------------------------------------------------------------------------------


def tls_conf(real_cloud: RealCloud, path: Path, listener: str, **more: str) -> Path:
    """Keystone on `listener` (https or mtls), RegionTLS's endpoints on the same kind."""
    interface = "public" if listener == "https" else "internal"
    return cloud_conf(
        real_cloud,
        path,
        auth_url=real_cloud.root("keystone", listener) + "/v3",
        **password(region=REGION_TLS, os_endpoint_type=interface, **more),
    )


def keystone_address(real_cloud: RealCloud, listener: str) -> str:
    return f"127.0.0.1:{real_cloud.port('keystone', listener)}"


def test_https_with_the_private_ca(
    real_cloud: RealCloud, identities: Identities, tmp_path: Path
) -> None:
    conf = tls_conf(real_cloud, tmp_path / "cloud.conf", "https", ca_file=str(real_cloud.tls.ca))
    check_worked(gc(real_cloud, conf), keystone=("https", "/v3/auth/tokens"), listener="https")


def test_https_without_a_ca_file_is_one_line(
    real_cloud: RealCloud, identities: Identities, tmp_path: Path
) -> None:
    conf = tls_conf(real_cloud, tmp_path / "cloud.conf", "https")
    run = gc(real_cloud, conf)
    check_refused(run, keystone_address(real_cloud, "https"))
    assert not run.tokens()


def test_https_with_a_wrong_ca_file_is_one_line(
    real_cloud: RealCloud, identities: Identities, tmp_path: Path
) -> None:
    wrong = real_cloud.tls.other_ca
    conf = tls_conf(real_cloud, tmp_path / "cloud.conf", "https", ca_file=str(wrong))
    run = gc(real_cloud, conf)
    check_refused(run, keystone_address(real_cloud, "https"), str(wrong))
    assert not run.tokens()


def test_tls_insecure_works_with_a_warning(
    real_cloud: RealCloud, identities: Identities, tmp_path: Path
) -> None:
    conf = tls_conf(real_cloud, tmp_path / "cloud.conf", "https", tls_insecure="true")
    run = gc(real_cloud, conf)
    check_worked(run, keystone=("https", "/v3/auth/tokens"), listener="https")
    lines = run.stderr.splitlines()
    assert [line for line in lines if "tls-insecure" in line], run.stderr
    # One warning for the setting, not one per request (urllib3's InsecureRequestWarning).
    assert not [line for line in lines if "InsecureRequestWarning" in line], run.stderr


def test_mutual_tls_with_a_client_certificate(
    real_cloud: RealCloud, identities: Identities, tmp_path: Path
) -> None:
    tls = real_cloud.tls
    conf = tls_conf(
        real_cloud,
        tmp_path / "cloud.conf",
        "mtls",
        ca_file=str(tls.ca),
        cert_file=str(tls.client_cert),
        key_file=str(tls.client_key),
    )
    check_worked(gc(real_cloud, conf), keystone=("mtls", "/v3/auth/tokens"), listener="mtls")


def test_mutual_tls_without_a_client_certificate_is_one_line(
    real_cloud: RealCloud, identities: Identities, tmp_path: Path
) -> None:
    conf = tls_conf(real_cloud, tmp_path / "cloud.conf", "mtls", ca_file=str(real_cloud.tls.ca))
    run = gc(real_cloud, conf)
    check_refused(run, keystone_address(real_cloud, "mtls"))
    assert not run.tokens()


# --- deployers' templates ---------------------------------------------------------------------


def from_template(name: str, path: Path, values: dict[str, str]) -> Path:
    path.write_text(string.Template((DEPLOYERS / name).read_text()).substitute(values))
    path.chmod(0o600)
    return path


def network_values(real_cloud: RealCloud) -> dict[str, str]:
    return {
        "EXTERNAL_NETWORK_ID": real_cloud.seeded.external_network_id,
        "CLUSTER_SUBNET": real_cloud.seeded.subnet_id,
        "CA_FILE": str(real_cloud.tls.ca),
        "REGION_NAME": REGION_TLS,
    }


def test_magnums_cloud_config(
    real_cloud: RealCloud, identities: Identities, tmp_path: Path
) -> None:
    values = network_values(real_cloud) | {
        "AUTH_URL": real_cloud.root("keystone", "https") + "/identity",
        "TRUSTEE_USER_ID": identities.trustee_id,
        "TRUSTEE_PASSWORD": identities.trustee_password,
        "TRUST_ID": identities.trust_id,
    }
    conf = from_template("magnum-cloud-config.ini", tmp_path / "cloud-config", values)
    run = gc(real_cloud, conf)
    check_worked(run, keystone=("https", "/identity/v3/auth/tokens"), listener="https")


def test_cluster_api_provider_openstack_clouds_yaml(
    real_cloud: RealCloud, identities: Identities, tmp_path: Path
) -> None:
    values = network_values(real_cloud) | {
        "AUTH_URL": real_cloud.root("keystone", "https") + "/",
        "APPLICATION_CREDENTIAL_ID": identities.application_credential_id,
        "APPLICATION_CREDENTIAL_SECRET": identities.application_credential_secret,
    }
    clouds = from_template("capo-clouds.yaml", tmp_path / "clouds.yaml", values)
    conf = from_template(
        "capo-cloud.conf", tmp_path / "cloud.conf", values | {"CLOUDS_FILE": str(clouds)}
    )
    run = gc(real_cloud, conf)
    check_worked(run, keystone=("https", "/v3/auth/tokens"), listener="https")


def test_kubespray_style_cloud_config(
    real_cloud: RealCloud, identities: Identities, tmp_path: Path
) -> None:
    values = network_values(real_cloud) | {
        "AUTH_URL": real_cloud.root("keystone", "https") + "/v3",
        "USERNAME": TENANT["username"],
        "PASSWORD": TENANT["password"],
        "PROJECT_ID": identities.project_id,
        "DOMAIN_NAME": "Default",
    }
    conf = from_template("kubespray-cloud-config.ini", tmp_path / "cloud-config", values)
    run = gc(real_cloud, conf)
    check_worked(run, keystone=("https", "/v3/auth/tokens"), listener="https")
