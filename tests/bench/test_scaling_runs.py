"""`python -m bench.scaling` keeps working: at tiny sizes its table has a row per size with
numbers in every measure (converge time, the tree's PSS, cloud calls, CPU-seconds, the
simulators' share, the load), the simulators are among the processes whose CPU it counts,
the sizing section applies its rules to each row, and the plot is written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.scaling import Size, parse_args, settings_for, sizes_of
from pyccm import lifetime
from tests.bench.tables import table_rows

REPO = Path(__file__).resolve().parents[2]
NUMBER = r"[\d,]+(?:\.\d+)?"


def _numbers(cell: str) -> list[float]:
    return [float(n.replace(",", "")) for n in re.findall(NUMBER, cell)]


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_the_table_has_a_row_of_numbers_per_size(tmp_path: Path) -> None:
    out = tmp_path / "scaling"
    result = subprocess.run(
        [
            *(sys.executable, "-m", "bench.scaling", "--sizes", "8,16", "--lb-services", "2"),
            *("--extra", "16x4", "--kubelet-seconds", "2", "--provisioning-delay", "0.2"),
            *("--timeout", "90", "--out", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=290,
        cwd=REPO,
        check=False,
        **lifetime.tied(),  # a killed pytest takes it, and so all it started, with it
    )
    assert result.returncode == 0, result.stdout + result.stderr
    table = out.with_suffix(".md").read_text()
    rows = table_rows(table, "| nodes |")
    # Two Services per node, of which the LB ones.
    assert [row[:2] for row in rows] == [["8", "2 (14)"], ["16", "2 (30)"], ["16", "4 (28)"]]
    for row in rows:
        converge, pss, calls, cpu, share, load = row[3:9]
        assert all(t > 0 for t in _numbers(converge)), row
        # Synced, held after converging, peak converging, peak at cold start.
        assert len(_numbers(pss)) == 4, row
        assert all(mib > 0 for mib in _numbers(pss)), row
        assert _numbers(calls)[0] > 0, row
        tree, simulators, driver, other = _numbers(cpu)
        assert tree > 0, row
        assert min(simulators, driver, other) >= 0, row
        of_cpu, of_capacity = _numbers(share)
        assert 0 <= of_capacity <= of_cpu <= 100, row
        assert len(_numbers(load)) == 2, row
    cpu_section = table[table.index("## CPU-s by process while converging") :]
    cpu_rows = {row[0] for row in table_rows(cpu_section, "| process (nodes x LB)")}
    assert {"kube-sim", "openstack-sim", "manager", "service-0"} <= cpu_rows
    sizing = table_rows(table, "| nodes x LB |")
    assert [row[0] for row in sizing] == ["8 x 2", "16 x 2", "16 x 4"]
    for row in sizing:
        request, limit = (int(cell.strip("*Mi")) for cell in row[3:5])
        assert 0 < request <= limit, row
    assert out.with_suffix(".png").stat().st_size > 0


def test_a_size_gets_two_services_per_node_and_the_large_cluster_settings(
    tmp_path: Path,
) -> None:
    args = parse_args(["--out", str(tmp_path / "scaling")])
    assert sizes_of(args) == [
        Size(1000, 200),
        Size(2500, 200),
        Size(5000, 200),
        Size(10000, 200),
        Size(5000, 1000),
    ]
    settings = settings_for(args, Size(5000, 200))
    # The large-cluster bench's own size: 10,000 Services, 200 of them LoadBalancer.
    assert (settings.nodes, settings.services, settings.lb_services) == (5000, 10000, 200)
    assert settings.max_body == 4_194_304
    assert settings.churn == 0
    assert settings.sigterm_rounds == 0
    quick = parse_args(["--quick", "--out", str(tmp_path / "quick")])
    assert sizes_of(quick) == [Size(100, 20), Size(300, 20), Size(300, 60)]
