"""Benchmark of the kube simulator: `python -m bench.kube_sim`.

Runs `pyccm sim kube` as a subprocess (so its CPU and memory are its own), seeded with
5,000 nodes and 10,000 LoadBalancer Services, and measures from this process over plain
HTTP:

- the paginated list of all nodes with `limit=500` (target <= 0.5 s), over one
  keep-alive connection, as an informer's initial list does;
- watch throughput: 4 concurrent node watches while the simulator writes 20,000 node
  changes (admin `/_sim/churn`), in events per second delivered to each watcher
  (target >= 5,000/s each);
- the simulator's resident memory after seeding and after the runs (target <= 500 MB).

Each measurement is repeated and the median reported. Results go to
`bench/results/kube_sim.md` (table) and `bench/results/kube_sim.png` (plot).
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from pyccm import lifetime

RESULTS = Path(__file__).parent / "results"
TOKEN = "bench-admin-token"
NODES, SERVICES = 5_000, 10_000
PAGE = 500
WATCHERS = 4
CHURN_EVENTS = 20_000


@dataclass
class Sim:
    process: subprocess.Popen[str]
    host: str
    port: int
    startup: float

    def connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=120)

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS")


def start_sim(scratch: Path) -> Sim:
    began = time.perf_counter()
    command = [
        sys.executable, "-m", "pyccm", "sim", "kube", "--port", "0", "--token", TOKEN,
        "--kubeconfig-out", str(scratch / "kubeconfig"),
        "--seed-nodes", str(NODES), "--seed-services", str(SERVICES),
    ]  # fmt: skip
    process = lifetime.spawn(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    startup = time.perf_counter() - began
    url = urlsplit(line.split(" ready at ")[1].split()[0])
    if url.hostname is None or url.port is None:
        raise RuntimeError(f"unexpected readiness line: {line!r}")
    return Sim(process, url.hostname, url.port, startup)


def request(conn: http.client.HTTPConnection, method: str, path: str, body: object = None) -> bytes:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json"}
    conn.request(method, path, body=data, headers=headers)
    response = conn.getresponse()
    payload = response.read()
    if response.status != 200:
        raise RuntimeError(f"{method} {path}: {response.status} {payload[:200]!r}")
    return payload


def list_all_nodes(sim: Sim) -> tuple[float, int]:
    conn = sim.connection()
    began = time.perf_counter()
    names, token = 0, ""
    while True:
        path = f"/api/v1/nodes?limit={PAGE}" + (f"&continue={token}" if token else "")
        page = json.loads(request(conn, "GET", path))
        names += len(page["items"])
        token = page["metadata"].get("continue", "")
        if not token:
            break
    elapsed = time.perf_counter() - began
    conn.close()
    if names != NODES:
        raise RuntimeError(f"listed {names} nodes, expected {NODES}")
    return elapsed, names


def watch_rates(sim: Sim) -> list[float]:
    """Events per second seen by each of WATCHERS concurrent watches during one churn."""
    rv = json.loads(request(sim.connection(), "GET", "/_sim/state"))["resourceVersion"]
    ready = threading.Barrier(WATCHERS + 1)
    rates: list[float] = [0.0] * WATCHERS

    def watch(slot: int) -> None:
        conn = sim.connection()
        path = f"/api/v1/nodes?watch=1&resourceVersion={rv}&timeoutSeconds=300"
        conn.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
        response = conn.getresponse()
        ready.wait()
        first = last = 0.0
        for count in range(1, CHURN_EVENTS + 1):
            line = response.readline()
            if not line:
                raise RuntimeError(f"watch {slot} ended after {count - 1} events")
            last = time.perf_counter()
            if count == 1:
                first = last
        rates[slot] = (CHURN_EVENTS - 1) / (last - first)
        conn.close()

    threads = [threading.Thread(target=watch, args=(i,)) for i in range(WATCHERS)]
    for thread in threads:
        thread.start()
    ready.wait()
    request(sim.connection(), "POST", "/_sim/churn", {"count": CHURN_EVENTS})
    for thread in threads:
        thread.join()
    return rates


def write_results(rows: dict[str, object], lists: list[float], watches: list[list[float]]) -> None:
    RESULTS.mkdir(exist_ok=True)
    table = ["| measurement | result | target |", "|---|---|---|"]
    table += [f"| {name} | {value} |" for name, value in rows.items()]
    (RESULTS / "kube_sim.md").write_text(
        "# kube simulator benchmark\n\n"
        f"`python -m bench.kube_sim`: {NODES:,} nodes and {SERVICES:,} LoadBalancer Services, "
        "simulator in its own process, client over plain HTTP on loopback, "
        f"medians of {len(lists)} list runs and {len(watches)} watch runs "
        "(2-core machine, shared with other work).\n\n" + "\n".join(table) + "\n"
    )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.bar(range(1, len(lists) + 1), lists, color="tab:blue")
    left.axhline(0.5, color="tab:red", linestyle="--", label="target 0.5 s")
    left.set(title=f"List {NODES:,} nodes, limit={PAGE}", xlabel="run", ylabel="seconds")
    left.legend()
    for run, rates in enumerate(watches, start=1):
        right.scatter([run] * len(rates), rates, color="tab:green")
    right.axhline(5000, color="tab:red", linestyle="--", label="target 5,000/s")
    right.set(title=f"{WATCHERS} concurrent watches", xlabel="run", ylabel="events/s per watcher")
    right.set_ylim(bottom=0)
    right.legend()
    figure.tight_layout()
    figure.savefig(RESULTS / "kube_sim.png", dpi=100)


def main() -> int:
    lifetime.stop_on_signals()  # a SIGTERM or SIGHUP unwinds the `finally` that stops the sim
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list-runs", type=int, default=7)
    parser.add_argument("--watch-runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        sim = start_sim(Path(scratch))
        try:
            seeded_rss = sim.rss_mb()
            lists = [list_all_nodes(sim)[0] for _ in range(args.list_runs)]
            watches = [watch_rates(sim) for _ in range(args.watch_runs)]
            final_rss = sim.rss_mb()
        finally:
            lifetime.stop(sim.process, timeout=30)
            if sim.process.stdout is not None:
                sim.process.stdout.close()
    per_watcher = statistics.median(r for run in watches for r in run)
    slowest = statistics.median(min(run) for run in watches)
    listed = statistics.median(lists)
    rows: dict[str, object] = {
        "start + seed (process start to ready line)": f"{sim.startup:.1f} s | -",
        f"paginated list of {NODES:,} nodes (limit={PAGE})": f"{listed:.3f} s | <= 0.5 s",
        f"watch delivery, median per watcher ({WATCHERS} watchers)": (
            f"{per_watcher:,.0f} events/s | >= 5,000/s"
        ),
        "watch delivery, slowest watcher (median of runs)": (
            f"{slowest:,.0f} events/s | >= 5,000/s"
        ),
        "RSS after seeding": f"{seeded_rss:.0f} MB | <= 500 MB",
        "RSS after the runs": f"{final_rss:.0f} MB | <= 500 MB",
    }
    write_results(rows, lists, watches)
    for name, value in rows.items():
        print(f"{name}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
