"""`python -m bench.service_scale` keeps working: a tiny cloud converges, the resync rounds
it counts are read-only (the later ones read less), the same-run baseline of upstream's
algorithm runs, and the table and plot are written where `--out` says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pyccm import lifetime

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SERVICES = 4


def _row(table: str, starts: str) -> list[str]:
    line = next(line for line in table.splitlines() if line.startswith(starts))
    return [cell.strip() for cell in line.strip("|").split("|")]


@pytest.mark.timeout(240)
def test_the_benchmark_converges_counts_a_read_only_resync_and_writes_its_table(
    tmp_path: Path,
) -> None:
    out = tmp_path / "scale"
    result = subprocess.run(
        [
            *(sys.executable, "-m", "bench.service_scale", "--services", str(SERVICES)),
            *("--concurrency", str(SERVICES), "--shards", "", "--capped-qps", "0"),
            *("--calls-concurrency", str(SERVICES), "--resync-period", "8", "--runs", "1"),
            *("--baseline-services", "2"),
            *("--timeout", "120", "--out", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=230,
        cwd=REPO,
        check=False,
        **lifetime.tied(),  # a killed pytest takes it, and so all it started, with it
    )
    assert result.returncode == 0, result.stdout + result.stderr
    table = out.with_suffix(".md").read_text()
    timed = _row(table, f"| 1 x {SERVICES} |")
    assert f"{SERVICES} / {SERVICES}" in timed  # LBs / FIPs in the cloud at convergence
    resync = _row(table, "| no-op resync: the first")
    assert resync[4] == "0.00"  # writes per Service
    assert float(resync[3]) > 0  # it did read
    later = _row(table, "| no-op resync: the rounds after")
    assert later[4] == "0.00"
    # Verified load balancers: the load balancer and its floating IP only.
    assert 0 < float(later[3]) <= 2.0 < float(resync[3])
    upstream = _row(table, "| upstream's algorithm")
    assert float(upstream[3]) > 1.0  # seconds per Service: it waits for each ACTIVE
    assert _row(table, f"| pyccm, 1 x {SERVICES}")[-1].endswith("x**")
    delete = _row(table, "| delete")
    assert float(delete[4]) > 0
    assert out.with_suffix(".png").stat().st_size > 0
