"""Following the leader (runtime/leader.py) without sockets, on a fake clock: where the
worker's sockets go, and when. tests/bus/test_workers_follow_the_leader.py drives the same
decisions through real bus servers."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from pyccm.workers.runtime.leader import Endpoints, LeaderFollower, MoveSettings

SEEDS: Endpoints = ("tcp://seeds:5556", "tcp://seeds:5557")
LEADER: Endpoints = ("tcp://10.0.0.1:5556", "tcp://10.0.0.1:5557")
OTHER: Endpoints = ("tcp://10.0.0.2:5556", "tcp://10.0.0.2:5557")
SETTINGS = MoveSettings(backoff=0.25, backoff_max=2.0, forget_after=3.0)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def follower(clock: Clock) -> LeaderFollower:
    return LeaderFollower(seeds=SEEDS, settings=SETTINGS, worker="decisions", clock=clock)


def changes() -> float:
    value = REGISTRY.get_sample_value("pyccm_bus_leader_changes_total", {"worker": "decisions"})
    return value or 0.0


def test_a_refusal_naming_the_leader_moves_there_at_once(
    follower: LeaderFollower, clock: Clock
) -> None:
    before = changes()
    follower.refused(leader=LEADER, reason="not leading", here=SEEDS)
    assert follower.due(clock.now) == LEADER
    follower.moved(LEADER, at=clock.now)
    assert follower.due(clock.now + 10) is None
    assert follower.leader_changes == 1
    assert changes() == before + 1


def test_moves_without_getting_synced_back_off_doubling_to_a_cap(
    follower: LeaderFollower, clock: Clock
) -> None:
    expected = [0.0, 0.25, 0.5, 1.0, 2.0, 2.0, 2.0]
    for delay, target in zip(expected, [LEADER, OTHER] * 4, strict=False):
        follower.plan(target)
        if delay:
            assert follower.due(clock.now + delay - 0.01) is None
        assert follower.due(clock.now + delay) == target
        clock.now += delay
        follower.moved(target, at=clock.now)
    follower.synced()
    follower.plan(OTHER)
    assert follower.due(clock.now) == OTHER


def test_a_refusal_naming_no_one_sends_a_follower_back_to_its_seeds(
    follower: LeaderFollower, clock: Clock
) -> None:
    follower.refused(leader=(), reason="not leading", here=SEEDS)
    assert not follower.moving  # at the seeds already: it asks them again
    follower.refused(leader=(), reason="lost the lease", here=LEADER)
    assert follower.due(clock.now) == SEEDS


def test_a_silent_manager_sends_a_follower_back_to_its_seeds(follower: LeaderFollower) -> None:
    assert follower.silent(SEEDS) is False
    assert not follower.moving
    assert follower.silent(LEADER) is True
    assert follower.moving


def test_a_leader_that_left_is_not_followed_again_for_a_while(
    follower: LeaderFollower, clock: Clock
) -> None:
    follower.leaving(LEADER)
    follower.moved(SEEDS, at=clock.now)
    follower.synced()
    # A standby that has not re-read the Lease yet still names the leader that left.
    follower.refused(leader=LEADER, reason="not leading", here=SEEDS)
    assert not follower.moving
    clock.now += SETTINGS.forget_after + 0.1
    follower.refused(leader=LEADER, reason="not leading", here=SEEDS)
    assert follower.due(clock.now) == LEADER
