"""What authentication costs: keystoneauth1 in a short-lived child (what pyccm does) against
keystoneauth1 imported into the long-lived process (the other way the design allowed).

Run: `.venv/bin/python -m bench.keystone_child [rounds]` (default 7); writes
bench/results/keystone_child.md.

Against an OpenStack simulator process (no added latency), each round measures, in fresh
interpreters so that nothing is cached between rounds:

* **child**: a process that builds pyccm's client from the simulator's cloud.conf and
  authenticates once (`Connection.token()`, which runs `pyccm.provider.openstack.
  authenticate` as a child): its wall time, the child's CPU (user + system) and peak RSS
  (getrusage of the children), and the parent's PSS after it (smaps_rollup);
* **in process**: a process that imports keystoneauth1 and authenticates with its v3
  Password plugin and a Session itself: its wall time, CPU and PSS after it.

The PSS difference is what each worker would carry for good if keystoneauth1 ran inside it;
the child's CPU and wall time are paid once per token (Keystone's default lifetime is an
hour) per process.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from pyccm import lifetime
from pyccm_sim.demo import child

RESULTS = Path(__file__).resolve().parent / "results" / "keystone_child.md"

PREAMBLE = """\
import json, resource, sys, time
from pathlib import Path
def pss_kib():
    for line in Path('/proc/self/smaps_rollup').read_text().splitlines():
        if line.startswith('Pss:'):
            return int(line.split()[1])
    return 0
conf = Path(sys.argv[1])
"""

VIA_CHILD = (
    PREAMBLE
    + """\
from pyccm.provider.openstack.transport.client import build_client
from pyccm.provider.openstack.config import load_settings
from pyccm.provider.settings import ProviderSettings
settings = load_settings(conf, environ={})
client = build_client(settings=settings, provider_settings=ProviderSettings())
before = pss_kib()
started = time.monotonic()
client.connection.token()
wall = time.monotonic() - started
children = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": wall, "cpu": children.ru_utime + children.ru_stime,
                  "child_rss_kib": children.ru_maxrss, "pss_before": before,
                  "pss_after": pss_kib(),
                  "keystoneauth_loaded": "keystoneauth1" in sys.modules}))
"""
)

IN_PROCESS = (
    PREAMBLE
    + """\
from pyccm.provider.openstack.config import load_settings
from pyccm.provider.openstack.transport.connection import auth_method
g = load_settings(conf, environ={}).global_
before = pss_kib()
started = time.monotonic()
cpu_started = time.process_time()
from keystoneauth1 import session
from keystoneauth1.identity import v3
_, options = auth_method(g)
plugin = v3.Password(auth_url=g.auth_url, **options)
session.Session(auth=plugin).get_token()
print(json.dumps({"wall": time.monotonic() - started,
                  "cpu": time.process_time() - cpu_started,
                  "pss_before": before, "pss_after": pss_kib()}))
"""
)


def measure(code: str, conf: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", code, str(conf)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        **lifetime.tied(),
    )
    result: dict[str, float] = json.loads(done.stdout)
    return result


def main(argv: list[str]) -> int:
    rounds = int(argv[0]) if argv else 7
    lifetime.stop_on_signals()
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pyccm-ks-")))
        stack.enter_context(
            child(
                ["sim", "openstack", "--seed-nodes", "1", "--write-config", str(workdir)],
                workdir / "openstack.log",
            )
        )
        conf = workdir / "cloud.conf"
        runs: dict[str, list[dict[str, float]]] = {"child": [], "in process": []}
        for _ in range(rounds):
            runs["child"].append(measure(VIA_CHILD, conf))
            runs["in process"].append(measure(IN_PROCESS, conf))
    assert not any(run["keystoneauth_loaded"] for run in runs["child"])
    table = report(runs, rounds)
    print(table)
    RESULTS.write_text(table)
    return 0


def median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def report(runs: dict[str, list[dict[str, float]]], rounds: int) -> str:
    via, inside = runs["child"], runs["in process"]
    grown_child = median([{"d": r["pss_after"] - r["pss_before"]} for r in via], "d") / 1024
    grown_inside = median([{"d": r["pss_after"] - r["pss_before"]} for r in inside], "d") / 1024
    return "\n".join(
        [
            "# Keystone authentication: in a child process, or in the worker",
            "",
            "`python -m bench.keystone_child` (medians of "
            f"{rounds} rounds, each in fresh interpreters, against the OpenStack simulator), "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
            f"{os.getloadavg()[0]:.2f} at the end.",
            "",
            "| | wall per authentication | CPU per authentication | the process's PSS grows by |",
            "|---|---|---|---|",
            f"| keystoneauth1 in a child (pyccm) | {median(via, 'wall'):.2f} s | "
            f"{median(via, 'cpu'):.2f} s (the child's; its peak RSS "
            f"{median(via, 'child_rss_kib') / 1024:.0f} MiB, gone after) | "
            f"{grown_child:.1f} MiB |",
            f"| keystoneauth1 imported into the process | {median(inside, 'wall'):.2f} s | "
            f"{median(inside, 'cpu'):.2f} s | {grown_inside:.1f} MiB, for good |",
            "",
            "A worker authenticates once per token (Keystone's default token lifetime is an "
            "hour; pyccm renews 120 s before the expiry), so the child costs its CPU once an "
            "hour per process, and the resident memory of every worker stays as it was.",
            "",
        ]
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
