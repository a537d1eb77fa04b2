"""The service controller does the same things in the same order as when
`effects_in_order.json` was recorded: 20 seeded scenarios on the fake cloud
(tests/support/service_trace.py: creates, annotation and port changes, node joins,
departures and relabels, deletions with and without our finalizer, re-creations, type
changes, a status another writer cleared, drift resyncs, cloud and write failures, a load
balancer provisioning, another controller's load balancer), each step's cloud calls, writes
to the manager (typed, in order, with the cloud calls before each), sync outcomes with their
Warning events, and enqueued keys reduced to one digest per step.

A change meant to alter what the controller does re-records the file (`record()` in the
support module) and says why in its commit; any other difference is a regression: a write
moved before a cloud call, an event dropped or reordered, a bookkeeping step lost (the next
sync then does something else).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.service_trace import RECORDED, SEEDS, fake_run_digests

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("seed", range(SEEDS))
def test_each_step_has_the_recorded_effects(seed: int) -> None:
    recorded = json.loads((ROOT / RECORDED).read_text())[str(seed)]
    now = [f"{digest} {' '.join(step)}" for step, digest in fake_run_digests(seed)]
    # The first step that differs, with what came before it (the digests name no detail:
    # `python -m bench.service_trace` on both commits shows the effects themselves).
    for index, (was, got) in enumerate(zip(recorded, now, strict=True)):
        assert got == was, f"seed {seed}, step {index} ({was.split(' ', 1)[1]}): effects differ"
