"""The provider's Keystone token (pyccm/provider/openstack/keystone.py, authenticate.py) on the
OpenStack simulator: when it authenticates, how many times, through which proxy, how long a
Keystone that does not answer can hold a caller, and that nothing shows a secret. Counted in
the simulator's access log and in the process's metrics."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY, CollectorRegistry

from pyccm.provider.errors import CloudError
from pyccm.provider.openstack.config import load_settings
from pyccm.provider.openstack.transport.child import ChildError
from pyccm.provider.openstack.transport.client import OpenStackClient, build_client
from pyccm.provider.openstack.transport.connection import keystone_question
from pyccm.provider.openstack.transport.keystone import RENEW_BEFORE, Keystone
from pyccm.provider.settings import ProviderSettings
from pyccm_sim.openstack.calllog import Seq
from pyccm_sim.openstack.seed import APPCRED_CLOUD_NAME, CLOUD_NAME
from pyccm_sim.openstack.testing import OpenStackSimHandle, running_openstack_sim
from tests.support.proxy import connect_proxy

SIM_PASSWORD = "pyccm-sim-secret"


def client_for(conf: Path) -> OpenStackClient:
    return build_client(
        settings=load_settings(conf, environ={}),
        provider_settings=ProviderSettings(
            cloud_config=conf, cloud_api_qps=1000.0, cloud_api_burst=1000
        ),
        registry=CollectorRegistry(),
    )


def conf_with(sim: OpenStackSimHandle, tmp_path: Path, **changes: str) -> Path:
    """The simulator's cloud.conf with `[Global]` keys replaced (a value of "" removes the
    key); keys are given with underscores for dashes."""
    lines = sim.cloud_conf_path.read_text().splitlines()
    wanted = {key.replace("_", "-"): value for key, value in changes.items()}
    kept = [line for line in lines if line.split("=")[0].strip() not in wanted]
    at = kept.index("[Global]") + 1
    kept[at:at] = [f"{key} = {value}" for key, value in wanted.items() if value]
    path = tmp_path / "cloud.conf"
    path.write_text("\n".join(kept) + "\n")
    return path


def token_requests(sim: OpenStackSimHandle, since: Seq) -> int:
    calls = sim.calls(since=since)
    return len([c for c in calls if c.method == "POST" and c.path.endswith("/auth/tokens")])


def flavors(client: OpenStackClient) -> bytes:
    return client.call("compute", "GET", "/flavors", request="flavor_list")


def authentications(outcome: str) -> float:
    value = REGISTRY.get_sample_value("pyccm_keystone_authentications_total", {"outcome": outcome})
    return value or 0.0


@pytest.fixture(scope="module")
def short_tokens() -> Iterator[OpenStackSimHandle]:
    """Tokens valid for less than the renewal margin: each one is renewed before its use."""
    with running_openstack_sim(seed_nodes=1, token_ttl_s=RENEW_BEFORE - 30) as sim:
        yield sim


def test_one_token_serves_every_call_until_it_nears_its_expiry(
    sim: OpenStackSimHandle,
) -> None:
    client = client_for(sim.cloud_conf_path)
    mark = sim.mark()
    try:
        for _ in range(5):
            flavors(client)
    finally:
        client.close()

    assert token_requests(sim, mark) == 1


def test_a_token_within_the_renewal_margin_of_its_expiry_is_renewed_before_use(
    short_tokens: OpenStackSimHandle,
) -> None:
    client = client_for(short_tokens.cloud_conf_path)
    mark = short_tokens.mark()
    try:
        for _ in range(3):
            flavors(client)
    finally:
        client.close()

    # The first call asks for a token twice (the catalog for the endpoint, then the
    # header), each later one once: never a token closer to its expiry than the margin.
    assert token_requests(short_tokens, mark) == 4


@pytest.mark.parametrize(
    "auth_path",
    ["/identity/v3", "/identity/v3/", "/identity", "/identity/"],
)
def test_auth_url_with_or_without_its_version_is_found_by_discovery(
    sim: OpenStackSimHandle, tmp_path: Path, auth_path: str
) -> None:
    root = sim.cloud_conf_path.read_text().split("auth-url = ")[1].split("/identity")[0]
    client = client_for(conf_with(sim, tmp_path, auth_url=root + auth_path))
    mark = sim.mark()
    try:
        flavors(client)
    finally:
        client.close()

    posts = [c.path for c in sim.calls(since=mark) if c.method == "POST"]
    assert posts == ["/identity/v3/auth/tokens"]


def test_a_trust_with_user_id_and_password_authenticates_as_magnum_writes_it(
    sim: OpenStackSimHandle, tmp_path: Path
) -> None:
    user_id = sim._cloud.keystone.user_id
    conf = conf_with(
        sim,
        tmp_path,
        username="",
        tenant_name="",
        domain_name="",
        user_id=user_id,
        trust_id="pyccm-trust",
    )
    client = client_for(conf)
    mark = sim.mark()
    try:
        flavors(client)
    finally:
        client.close()

    assert token_requests(sim, mark) == 1


def test_concurrent_401s_on_one_token_make_one_authentication(sim: OpenStackSimHandle) -> None:
    client = client_for(sim.cloud_conf_path)
    try:
        flavors(client)
        sim.revoke_tokens()
        mark = sim.mark()
        with ThreadPoolExecutor(max_workers=20) as pool:
            answers = list(pool.map(lambda _: flavors(client), range(20)))
    finally:
        client.close()

    assert len(answers) == 20
    assert token_requests(sim, mark) == 1


def test_a_failed_authentication_is_not_repeated_within_its_backoff(
    sim: OpenStackSimHandle, tmp_path: Path
) -> None:
    client = client_for(conf_with(sim, tmp_path, password="not-the-password"))
    mark = sim.mark()
    refused_before = authentications("refused")
    try:
        for _ in range(5):
            with pytest.raises(CloudError, match="HTTP 401"):
                flavors(client)
    finally:
        client.close()

    assert token_requests(sim, mark) == 1
    assert authentications("refused") == refused_before + 1


class SilentServer:
    """Accepts connections and never answers: a hung Keystone."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.accepted.append(connection)

    def close(self) -> None:
        self.socket.close()
        for connection in self.accepted:
            connection.close()


def test_a_hung_keystone_holds_the_callers_that_need_a_token_until_the_deadline_only(
    sim: OpenStackSimHandle, tmp_path: Path
) -> None:
    hung = SilentServer()
    conf = conf_with(sim, tmp_path, auth_url=f"http://127.0.0.1:{hung.port}/v3")
    question = keystone_question(
        load_settings(conf, environ={}).global_, path=conf, timeout=60.0, user_agent="test"
    )
    deadline = 3.0
    keystone = Keystone(question=question, where="hung", deadline=deadline)
    timeouts_before = authentications("timeout")
    waited: list[float] = []

    def need_a_token() -> str:
        started = time.monotonic()
        try:
            keystone.token()
        except CloudError as error:
            return str(error)
        finally:
            waited.append(time.monotonic() - started)
        return "authenticated"

    try:
        with ThreadPoolExecutor(max_workers=5) as pool:
            errors = list(pool.map(lambda _: need_a_token(), range(5)))
    finally:
        hung.close()

    assert all("no answer within 3 s" in error for error in errors)
    # One child, killed at the deadline; the others waited for it, then failed at once
    # (the failure's backoff): nobody waited much longer than the deadline.
    assert authentications("timeout") == timeouts_before + 1
    assert max(waited) < deadline + 2.0


def test_no_repr_shows_a_secret(sim: OpenStackSimHandle) -> None:
    client = client_for(sim.cloud_conf_path)
    try:
        flavors(client)
        connection = client.connection
        token = connection.token()
        shown = " ".join(
            repr(thing)
            for thing in (token, connection, connection.keystone, client._redact, client)
        )
    finally:
        client.close()

    assert token.id not in shown
    assert SIM_PASSWORD not in shown
    assert SIM_PASSWORD not in repr(load_settings(sim.cloud_conf_path, environ={}))


def test_calls_go_through_the_environments_proxy_unless_no_proxy_exempts_the_host(
    sim: OpenStackSimHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keystone's requests (in the child) and the data path's take the same proxy, with its
    credentials. The simulator is addressed as 0.0.0.0 (Linux connects it locally), since
    loopback is never proxied, by Go's rules."""
    auth = sim.cloud_conf_path.read_text().split("auth-url = ")[1].split("\n")[0]
    conf = conf_with(sim, tmp_path, auth_url=auth.replace("127.0.0.1", "0.0.0.0"))
    with connect_proxy(require="tester:proxy-pass") as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url.replace("://", "://tester:proxy-pass@"))
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        through_proxy = client_for(conf)
        monkeypatch.setenv("NO_PROXY", "10.0.0.0/8,0.0.0.0/32")
        direct = client_for(conf)
        try:
            mark = sim.mark()
            flavors(through_proxy)
            proxied = proxy.connects()
            flavors(direct)
        finally:
            through_proxy.close()
            direct.close()
        after = proxy.connects()

    assert token_requests(sim, mark) == 2
    # Keystone's discovery GET and token POST, then the flavors; all with the proxy's
    # credentials; nothing more through it once NO_PROXY's CIDR exempts the host.
    assert len(proxied) == 3
    assert {(c.credentials, c.answered) for c in proxied} == {("tester:proxy-pass", 200)}
    assert after == proxied


def test_a_refusal_that_quotes_a_secret_back_is_scrubbed_in_the_error_and_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Whatever Keystone (or a proxy) says back goes through the scrubber: the password,
    the token, the application credential secret and a proxy's password never pass."""
    question = {
        "auth_url": "http://keystone.example:5000",
        "options": {"user_id": "u", "password": "pw-1"},
        "proxies": {"http": "http://tester:proxy%3Apass@proxy.example:3128"},
    }

    def refuse(module: str, asked: Mapping[str, Any], deadline: float) -> dict[str, Any]:
        raise ChildError("echoed pw-1 and proxy:pass back", status=400)

    keystone = Keystone(question=question, where="keystone.example:5000", deadline=1.0, ask=refuse)
    with caplog.at_level(logging.WARNING), pytest.raises(CloudError) as refused:
        keystone.token()

    assert str(refused.value) == "keystone: echoed *** and *** back"
    assert "pw-1" not in caplog.text
    assert "proxy:pass" not in caplog.text


def test_use_clouds_takes_the_password_from_secure_yaml_as_openstacksdk_does(
    sim: OpenStackSimHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """clouds.yaml without the password, secure.yaml (`$OS_CLIENT_SECURE_FILE`) with it:
    openstacksdk's loader, in its child, merges them; the settings record both files."""
    clouds = yaml.safe_load(sim.clouds_yaml_path.read_text())
    entry = clouds["clouds"][CLOUD_NAME]
    password = entry["auth"].pop("password")
    (tmp_path / "clouds.yaml").write_text(yaml.safe_dump({"clouds": {CLOUD_NAME: entry}}))
    secure = tmp_path / "secure.yaml"
    secure.write_text(yaml.safe_dump({"clouds": {CLOUD_NAME: {"auth": {"password": password}}}}))
    monkeypatch.setenv("OS_CLIENT_SECURE_FILE", str(secure))
    conf = tmp_path / "cloud.conf"
    conf.write_text(
        f"[Global]\nuse-clouds = true\nclouds-file = {tmp_path / 'clouds.yaml'}\n"
        f"cloud = {CLOUD_NAME}\n"
    )

    settings = load_settings(conf, environ={})
    client = client_for(conf)
    mark = sim.mark()
    try:
        flavors(client)
    finally:
        client.close()

    assert settings.global_.password == password
    assert secure in settings.sources
    assert token_requests(sim, mark) == 1


def test_use_clouds_without_a_cloud_takes_the_one_os_cloud_names(
    sim: OpenStackSimHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OS_CLOUD", APPCRED_CLOUD_NAME)
    conf = tmp_path / "cloud.conf"
    conf.write_text(f"[Global]\nuse-clouds = true\nclouds-file = {sim.clouds_yaml_path}\n")

    settings = load_settings(conf, environ={})
    client = client_for(conf)
    try:
        flavors(client)
    finally:
        client.close()

    assert settings.global_.application_credential_id
    assert not settings.global_.password
