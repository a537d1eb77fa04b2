"""`python -m bench.large_cluster` keeps working: a tiny cluster goes through every phase,
the restarted tree writes nothing to the cloud, and after node churn the correctness
checks (pools exact, nothing created twice, nothing leaked, routes exact) all pass."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def _row(table: str, starts: str) -> list[str]:
    line = next(line for line in table.splitlines() if line.startswith(starts))
    return [cell.strip() for cell in line.strip("|").split("|")]


@pytest.mark.timeout(240)
def test_the_benchmark_runs_every_phase_and_its_checks_pass(tmp_path: Path) -> None:
    out = tmp_path / "large"
    result = subprocess.run(
        [
            *(sys.executable, "-m", "bench.large_cluster", "--nodes", "12", "--services", "8"),
            *("--lb-services", "2", "--churn", "2", "--kubelet-seconds", "2"),
            *("--node-monitor-period", "1", "--provisioning-delay", "0.2"),
            *("--sigterm-rounds", "0", "--timeout", "90", "--out", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=230,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    table = out.with_suffix(".md").read_text()
    assert _row(table, "| correctness after churn")[1] == "all ok"
    assert "**0 cloud writes**" in _row(table, "| cold start")[1]
    assert "*every pool holds exactly the eligible nodes*: ok" in table
    # Two nodes joined and two left: every pool's members were written at least once.
    assert "pools never touched: 0" in table
    assert out.with_suffix(".png").stat().st_size > 0
