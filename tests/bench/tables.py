"""Reading the benches' markdown tables back, for the tests of their reports."""

from __future__ import annotations


def table_rows(table: str, header: str) -> list[list[str]]:
    """The cells of each row of the markdown table whose header line starts with `header`,
    stripped of spaces and of bold markers."""
    lines = table.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip().strip("*") for cell in line.strip("|").split("|")])
    return rows
