"""`python -m bench.tree_memory` keeps working: on a tiny demo tree its report lists every
process of the tree with its PSS, the totals are the sums of the rows, and every step of
the import ladder and the import-time table are there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.tree_memory import LADDER, TREE_ROLES, parse_importtime, parse_rollup
from tests.bench.tables import table_rows

REPO = Path(__file__).resolve().parents[2]
# Each row is rounded to 0.1 MiB: a sum of n rows may differ from the rounded total by n/20.
ROUNDING = 0.05


def _rows(table: str, header: str) -> dict[str, list[str]]:
    """The rows of the markdown table whose header line starts with `header`, by first cell."""
    return {cells[0]: cells[1:] for cells in table_rows(table, header)}


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_the_report_lists_every_process_of_the_tree_and_its_sums_add_up(tmp_path: Path) -> None:
    out = tmp_path / "tree.md"
    result = subprocess.run(
        [sys.executable, "-m", "bench.tree_memory", "--quick", "--settle", "1", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=290,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    table = out.read_text()

    tree = _rows(table, "| process | pid | PSS | RSS |")
    # pid, PSS, RSS, private, shared, PSS anon, PSS file
    for role in TREE_ROLES:
        assert role in tree, (role, sorted(tree))
        assert int(tree[role][0]) > 0
        assert float(tree[role][1]) > 0, (role, tree[role])
        assert float(tree[role][2]) >= float(tree[role][1])
    for column in range(1, 7):
        parts = [float(tree[role][column]) for role in TREE_ROLES]
        total = float(tree["tree total"][column])
        assert abs(total - sum(parts)) <= ROUNDING * (len(parts) + 1), (column, parts, total)
        without = float(tree["tree without supervisord"][column])
        assert abs(without - sum(parts[1:])) <= ROUNDING * len(parts), (column, parts, without)

    ladder = _rows(table, "| imported | modules | PSS |")
    for label, _ in LADDER:
        assert float(ladder[label][1]) > 0, (label, ladder.get(label))
    bare = int(ladder[LADDER[0][0]][0])
    assert all(int(ladder[label][0]) > bare for label, _ in LADDER[1:])

    times = _rows(table, "| module | cumulative (ms) | self (ms) |")
    assert "`pyccm.workers.app`" in times


def test_a_rollup_splits_private_from_shared() -> None:
    rollup = (
        "5592e49ab000-7ffe22bdf000 ---p 00000000 00:00 0                          [rollup]\n"
        "Rss:                1736 kB\nPss:                 194 kB\nPss_Anon:  112 kB\n"
        "Pss_File:             82 kB\nShared_Clean:       1584 kB\nShared_Dirty:   0 kB\n"
        "Private_Clean:        40 kB\nPrivate_Dirty:       112 kB\nSwap:   0 kB\n"
    )
    memory = parse_rollup(rollup)
    assert (memory.rss, memory.pss, memory.private, memory.shared) == (1736, 194, 152, 1584)
    assert (memory.pss_anon, memory.pss_file) == (112, 82)


def test_importtime_lines_keep_the_module_and_its_depth() -> None:
    stderr = (
        "import time: self [us] | cumulative | imported package\n"
        "import time:       120 |        120 |   _io\n"
        "import time:      2201 |       5000 |     zmq.sugar\n"
        "import time:        90 |       5090 | zmq\n"
    )
    parsed = parse_importtime(stderr)
    assert [(t.module, t.self_us, t.cumulative_us, t.depth) for t in parsed] == [
        ("_io", 120, 120, 1),
        ("zmq.sugar", 2201, 5000, 2),
        ("zmq", 90, 5090, 0),
    ]
