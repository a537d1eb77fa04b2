"""The `pyccm` command run as a process (its exit code and output are what an operator
sees), and the LoadBalancer Service it acts on (tests/gc, tests/plan)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def lb_service(name: str, namespace: str = "default") -> dict[str, Any]:
    """A LoadBalancer Service for the kube simulator, as `tests.support.lb.service`
    builds it for the provider (ports 80 and 443)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "type": "LoadBalancer",
            "ports": [
                {"name": "p80", "port": 80, "nodePort": 30080, "protocol": "TCP"},
                {"name": "p443", "port": 443, "nodePort": 30443, "protocol": "TCP"},
            ],
        },
    }


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def pyccm(*args: str | Path, timeout: float = 120.0) -> Ran:
    """`pyccm ARGS...` as a process, without the in-cluster hint of a pod."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST",)}
    env.pop("PYCCM_CLUSTER_ID", None)
    done = subprocess.run(
        [sys.executable, "-m", "pyccm.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    return Ran(done.returncode, done.stdout, done.stderr)
