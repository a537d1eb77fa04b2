"""pyccm.pacing is a leaf every layer may import: loading it brings in the standard library
and nothing else (no other pyccm module, no third-party package)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
before = set(sys.modules)
import pyccm.pacing
print("\\n".join(sorted(set(sys.modules) - before)))
"""


def test_importing_pacing_loads_only_the_standard_library() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = done.stdout.split()
    assert "pyccm.pacing" in loaded

    foreign = [
        name
        for name in loaded
        if name.split(".")[0] not in sys.stdlib_module_names
        and name not in ("pyccm", "pyccm.pacing")
    ]

    assert foreign == []
