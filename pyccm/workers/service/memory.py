"""The service worker's malloc setting: large buffers go back to the system once freed.

A sync that creates a load balancer, or updates its members, builds, sends and reads a few
megabytes of JSON at 5,000 nodes (each pool's member list, the encoded request, the cloud's
answer), in up to `--concurrent-service-syncs` threads at once. glibc's malloc maps a buffer
over its mmap threshold (128 KiB) on its own and unmaps it when freed, but it raises that
threshold to the size of each such buffer freed (up to 32 MiB): from then on these buffers
come from its per-thread arenas, which keep what their busiest moment took. Fixing the
threshold (`mallopt(M_MMAP_THRESHOLD)`, as the `MALLOC_MMAP_THRESHOLD_` variable would)
keeps them mapped: `bench.member_memory 5000 20 4194304 --pss`, 20 load balancers of 5,000
members ensured at once, grows the process by ~4 MiB instead of 30-55.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)

# glibc's <malloc.h>.
M_MMAP_THRESHOLD = -3
# glibc's default; setting it turns the dynamic raise off.
MMAP_THRESHOLD = 128 * 1024


def return_large_buffers() -> bool:
    """Fix glibc's mmap threshold in this process; False where there is no glibc (musl
    has no such threshold to fix, and other systems no `mallopt`)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    applied = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    if not applied:
        log.debug("mallopt(M_MMAP_THRESHOLD) is not supported here")
    return applied
