"""A rotated password put in force by a reload of `cloud.conf`, on the real Keystone
(docs/features.md#reload-cloudconf-without-a-restart): the operator changes the account's password
in Keystone, then the Secret holding `cloud.conf`; the provider's next `reload_config()` builds a
new connection, which authenticates with the new password, and its calls succeed. The old password
no longer works anywhere, and neither password appears in an error.

Its own user (`rotator`, in the tenant's project), so the shared `ccm` account that the
other tests' trees use keeps its password.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from pyccm.provider.errors import ProviderError
from pyccm.provider.openstack import create_cloud
from pyccm.provider.openstack.cloud import OpenStackCloud
from pyccm.provider.settings import ProviderSettings
from tests.conformance.realcloud import TENANT, RealCloud
from tests.support.waiting import wait_for

pytestmark = pytest.mark.conformance

USER = "rotator"
OLD, NEW = "rotator-before-0001", "rotator-after-0002"


@pytest.fixture
def rotator(real_cloud: RealCloud) -> Iterator[Any]:
    identity = real_cloud.connection("admin").identity
    domain = identity.find_domain("default")
    project = identity.find_project(TENANT["project"], domain_id=domain.id)
    user = identity.create_user(name=USER, password=OLD, domain_id=domain.id)
    for role in ("member", "load-balancer_member"):
        identity.assign_project_role_to_user(project, user, identity.find_role(role))
    yield user
    identity.delete_user(user)


def conf_for(real_cloud: RealCloud, path: Path, password: str) -> Path:
    """The stack's cloud.conf, as the account `rotator` with `password`."""
    own = {"username": f"username = {USER}", "password": f"password = {password}"}
    lines = [
        own.get(line.partition("=")[0].strip(), line)
        for line in real_cloud.cloud_conf_path.read_text().splitlines()
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def cloud_on(path: Path) -> OpenStackCloud:
    settings = ProviderSettings(cloud_config=path, cloud_api_qps=100.0, cloud_api_burst=100)
    return create_cloud(settings=settings, registry=CollectorRegistry(), environ={})


def networks(cloud: OpenStackCloud) -> bytes:
    return cloud.client.call("network", "GET", "/networks", request="network_list")


def token_requests(real_cloud: RealCloud, since: int) -> list[int]:
    """Statuses of the password authentications Keystone answered since `since`."""
    return [
        c.status
        for c in real_cloud.calls(since)
        if c.service == "keystone" and c.method == "POST" and c.path.endswith("/auth/tokens")
    ]


def test_a_rotated_password_is_put_in_force_by_a_reload(
    real_cloud: RealCloud, rotator: Any, tmp_path: Path
) -> None:
    path = conf_for(real_cloud, tmp_path / "cloud.conf", OLD)
    cloud = cloud_on(path)
    try:
        networks(cloud)

        real_cloud.connection("admin").identity.update_user(rotator, password=NEW)
        changed = time.time()
        # The old password is refused from now on: a process that starts with it fails
        # with a clear error that names neither password.
        stale = cloud_on(conf_for(real_cloud, tmp_path / "stale.conf", OLD))
        try:
            with pytest.raises(ProviderError) as refused:
                networks(stale)
        finally:
            stale.close()
        assert "401" in str(refused.value)
        assert OLD not in str(refused.value)
        assert NEW not in str(refused.value)

        # Keystone revokes the user's tokens on a password change, by time, and a fernet
        # token's issue time counts whole seconds: a token issued in the second of the change
        # is revoked too. The Secret's update reaches a pod a minute later; here, the next
        # second is enough.
        wait_for(
            lambda: int(time.time()) > int(changed), timeout=5, what="the second after the change"
        )
        conf_for(real_cloud, path, NEW)
        mark = real_cloud.mark()
        change = cloud.reload_config()
        assert change is not None
        assert "Global" in change.sections, change
        networks(cloud)
        # The reloaded connection authenticated once, with the new password, and was let in.
        assert token_requests(real_cloud, mark) == [201]
        # Nothing changed since: the next poll reads the file and does nothing.
        assert cloud.reload_config() is None
    finally:
        cloud.close()
