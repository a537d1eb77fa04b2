"""`python -m bench.multi_listener` keeps working on the real services: a small run (3
ports, 1 node joining 1) writes its table with both algorithms at both moments, each
leaving every pool with every node (the bench checks it in Octavia before it reports), and
a node joining costs one member write per pool for both."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.conformance


@pytest.mark.timeout(600)
def test_the_bench_measures_both_algorithms_on_the_real_octavia(tmp_path: Path) -> None:
    out = tmp_path / "multi_listener.md"
    small = ("--ports", "3", "--nodes", "1", "--settle", "0.2", "--out", str(out))
    result = subprocess.run(
        [sys.executable, "-m", "bench.multi_listener", *small],
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in out.read_text().splitlines()
        if line.startswith("| 0.2 |")
    ]
    by_moment = {(row[1], row[2]): row for row in rows}
    assert set(by_moment) == {
        (algorithm, moment)
        for algorithm in ("pyccm", "upstream's")
        for moment in ("create", "node joins")
    }
    for algorithm in ("pyccm", "upstream's"):
        joined = by_moment[(algorithm, "node joins")]
        assert joined[5] == "3", joined  # one batch member PUT per pool
        assert float(joined[3]) > 0
