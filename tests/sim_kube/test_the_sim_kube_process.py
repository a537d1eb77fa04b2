"""`pyccm sim kube` as the demo and fault drills run it: one readiness line, a working
kubeconfig, a clean exit 0 on SIGTERM, and exit 2 for a bad flag value."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from pyccm import lifetime
from tests.support.kube_http import client

READY = re.compile(r"^pyccm sim kube: ready at (http://127\.0\.0\.1:\d+) \(kubeconfig: (.+)\)$")


def test_the_process_announces_itself_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    process = lifetime.spawn(
        [
            sys.executable,
            "-m",
            "pyccm",
            "sim",
            "kube",
            "--port",
            "0",
            "--kubeconfig-out",
            str(kubeconfig),
            "--seed-nodes",
            "2",
            "--seed-services",
            "1",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        match = READY.match(process.stdout.readline().rstrip("\n"))
        assert match is not None
        assert match.group(2) == str(kubeconfig)
        config = yaml.safe_load(kubeconfig.read_text())
        assert config["clusters"][0]["cluster"]["server"] == match.group(1)
        assert kubeconfig.stat().st_mode & 0o077 == 0
        api = client.CoreV1Api(
            client.ApiClient(
                client.Configuration(
                    host=match.group(1),
                    api_key={"authorization": f"Bearer {config['users'][0]['user']['token']}"},
                )
            )
        )
        assert [n.metadata.name for n in api.list_node().items] == ["node-0000", "node-0001"]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
        assert process.stdout.read() == ""
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def test_a_bad_flag_value_is_exit_code_2(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pyccm", "sim", "kube", "--error-rate", "fly=1"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "unknown verb 'fly'" in result.stderr
