"""`python -m bench.large_cluster` keeps working: a tiny cluster goes through every phase,
the restarted tree writes nothing to the cloud, and after node churn the correctness
checks (pools exact, nothing created twice, nothing leaked, routes exact) all pass.

And `pyccm demo` at the bench's size (`--nodes 5000 --services 200`): a kube API budget
that lets 5,000 nodes converge, and a summary that shows a sample instead of 10,000 lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pyccm import lifetime
from pyccm_sim.demo import SUMMARY_ROWS, _table, demo_kube_qps, demo_timeout

REPO = Path(__file__).resolve().parents[2]


def _row(table: str, starts: str) -> list[str]:
    line = next(line for line in table.splitlines() if line.startswith(starts))
    return [cell.strip() for cell in line.strip("|").split("|")]


@pytest.mark.e2e
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
        **lifetime.tied(),  # a killed pytest takes it, and so all it started, with it
    )
    assert result.returncode == 0, result.stdout + result.stderr
    table = out.with_suffix(".md").read_text()
    assert _row(table, "| correctness after churn")[1] == "all ok"
    cold = _row(table, "| cold start")
    assert "**0 cloud writes**" in cold[1]
    # A restarted tree writes nothing but the election's Lease renewals and Event.
    assert cold[-1] == "met", cold
    assert "*every pool holds exactly the eligible nodes*: ok" in table
    # Two nodes joined and two left: every pool's members were written at least once.
    assert "pools never touched: 0" in table
    # clusterloader2's two measures: every Service got its ingress, then an
    # UpdatedLoadBalancer Event for each of the two toggles of a node's exclusion label.
    creation = _row(table, "| ServiceCreationLatency (clusterloader2")
    assert creation[1].startswith("p50 "), creation
    assert "never" not in creation[1]
    node_sync = _row(table, "| LoadBalancerNodeSyncLatency (clusterloader2")
    assert "2 toggles x 2 Services" in node_sync[0]
    assert node_sync[1].startswith("p50 "), node_sync
    assert "never" not in node_sync[1]
    # The simulators' CPU is part of the run's: some of it, not all of it.
    share = _row(table, "| the simulators' CPU while converging")[1]
    simulators, _, total = share.split(" CPU-s")[0].partition(" of ")
    assert 0 < float(simulators) < float(total), share
    pss = _row(table, "| PSS of the whole tree once synced")
    assert float(pss[1].split("**")[1]) > 0
    assert out.with_suffix(".png").stat().st_size > 0


def test_the_demo_keeps_upstreams_budget_small_and_raises_it_for_a_large_cluster() -> None:
    assert demo_kube_qps(20) == 20
    # About 4 writes per node: 5,000 nodes in under a minute of writes, not 17 minutes.
    assert demo_kube_qps(5000) == 500
    assert demo_timeout(20) == 180
    assert demo_timeout(5000) == 580


def test_the_demo_summary_prints_a_sample_of_a_large_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = [("NODE", "ADDRESS")] + [(f"node-{i:04d}", f"10.0.0.{i}") for i in range(60)]
    _table(rows)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 1 + SUMMARY_ROWS + 1
    assert printed[1].startswith("node-0000")
    assert printed[-1] == f"... and {60 - SUMMARY_ROWS} more"
