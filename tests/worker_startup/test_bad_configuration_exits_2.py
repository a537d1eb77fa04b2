"""A worker with a bad configuration says so in one line and exits 2, at once.

No manager runs here: a worker that asked its manager for anything before checking its own
configuration would wait forever instead (the service worker once asked for the
cluster id first). The wait is bounded by `subprocess.run`'s timeout, so such a regression fails
with TimeoutExpired instead of hanging the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pyccm.provider.registry import known_providers

MISSING = "/nonexistent/cloud.conf"
# Far longer than a worker takes to read its flags and cloud.conf (well under 2 s here).
DEADLINE = 60


def no_auth_url(tmp: Path) -> str:
    conf = tmp / "cloud.conf"
    conf.write_text("[Global]\nusername = admin\npassword = not-logged\n")
    return str(conf)


CASES = {
    "service, a missing cloud.conf": (
        ["service", "--cloud-config", MISSING],
        f"{MISSING}: cloud config file does not exist",
    ),
    "route, a missing cloud.conf": (
        ["route", "--cluster-cidr", "10.244.0.0/16", "--cloud-config", MISSING],
        f"{MISSING}: cloud config file does not exist",
    ),
    "node, a missing cloud.conf": (
        ["cloud-node", "--cloud-config", MISSING],
        f"{MISSING}: cloud config file does not exist",
    ),
    "service, an unknown provider": (
        ["service", "--cloud-provider", "nosuch"],
        f"unknown cloud provider 'nosuch' (known: {', '.join(known_providers())})",
    ),
    "lifecycle, an unknown provider": (
        ["lifecycle", "--cloud-provider", "nosuch"],
        f"unknown cloud provider 'nosuch' (known: {', '.join(known_providers())})",
    ),
    "service, a bad shard": (
        ["service", "--cloud-provider", "fake", "--shard", "2/2"],
        "--shard '2/2': need 0 <= i < n",
    ),
    "route, no cloud API rate": (
        ["route", "--cloud-api-qps", "0"],
        "--cloud-api-qps must be above 0 and --cloud-api-burst at least 1",
    ),
    "service, a cloud API burst below 1": (
        ["service", "--cloud-api-burst", "0"],
        "--cloud-api-qps must be above 0 and --cloud-api-burst at least 1",
    ),
    "service, a class-only claim without a class": (
        ["service", "--cloud-provider", "fake", "--load-balancer-class-only"],
        "--load-balancer-class-only needs --load-balancer-class NAME",
    ),
}


def worker(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYCCM_")}
    return subprocess.run(
        [sys.executable, "-m", "pyccm", "worker", *args, f"--runtime-dir={tmp}/run"],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
        env=env,
    )


@pytest.mark.parametrize(("args", "line"), list(CASES.values()), ids=list(CASES))
def test_a_bad_configuration_is_one_line_on_stderr_and_exit_2(
    args: list[str], line: str, tmp_path: Path
) -> None:
    done = worker(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    name = {"lifecycle": "cloud-node-lifecycle"}.get(args[0], args[0])
    assert done.stderr.splitlines() == [f"pyccm worker {name}: {line}"]
    assert done.stdout == ""


def test_a_cloud_conf_without_auth_url_names_file_section_and_key_only(tmp_path: Path) -> None:
    conf = no_auth_url(tmp_path)
    done = worker(tmp_path, "service", "--cloud-config", conf)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"pyccm worker service: {conf}: [Global] auth-url: required "
        "(or use-clouds with a clouds.yaml)"
    ]
    assert "not-logged" not in done.stderr


def test_a_v3_username_without_its_domain_is_one_line_naming_the_missing_setting(
    tmp_path: Path,
) -> None:
    """The identity settings are checked while the connection is built (no request is
    made): the worker says so in one line and exits 2, the password nowhere in it."""
    conf = tmp_path / "cloud.conf"
    conf.write_text(
        "[Global]\nauth-url = http://127.0.0.1:9/v3\nusername = admin\n"
        "password = not-logged\ntenant-name = demo\nregion = RegionOne\n"
    )
    done = worker(tmp_path, "service", "--cloud-config", str(conf))
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"pyccm worker service: {conf}: [Global] username: needs user-domain-name or "
        "user-domain-id (or domain-name / domain-id); a V3 user name is unique only within "
        "its domain"
    ]
    assert "not-logged" not in done.stderr
