"""The service worker fixes glibc's mmap threshold (`pyccm/workers/service/memory.py`), so
the megabytes of member JSON a sync builds and reads are mapped on their own and unmapped
when freed, however large the buffers freed before them; without it, glibc serves them from
its arenas after the first one, and the process keeps its peak."""

from __future__ import annotations

import subprocess
import sys

import pytest

# In a fresh interpreter: free one 4 MB buffer (glibc then raises its threshold unless it
# is fixed), allocate another, and print how many bytes malloc has mapped on their own.
PROBE = """
import ctypes, sys
class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
if sys.argv[1] == "fixed":
    from pyccm.workers.service.memory import return_large_buffers
    assert return_large_buffers()
first = bytearray(4_000_000)
del first
before = libc.mallinfo2().hblkhd
second = bytearray(4_000_000)
print(libc.mallinfo2().hblkhd - before)
"""


def mapped_after_a_large_free(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def test_a_large_buffer_is_mapped_on_its_own_even_after_another_was_freed() -> None:
    if mapped_after_a_large_free("as-is") != 0:
        pytest.skip("this malloc does not raise its mmap threshold (not glibc)")

    assert mapped_after_a_large_free("fixed") >= 4_000_000
