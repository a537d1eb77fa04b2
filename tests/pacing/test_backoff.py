"""pyccm.pacing.Backoff: the sequence from base by factor up to the cap, per key, reset, the
jitter's bounds (with the random source fixed), and the numbers each user keeps: client-go's
work queue (5 ms to 1000 s; 5 s to 300 s), the reflector (0.8 s to 30 s, jittered), the
webhook reviews (0.5 s x1.5, 20 %) and a PENDING_* load balancer (1 s x1.5 to 30 s)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pyccm.pacing import Backoff


def sequence(backoff: Backoff, n: int, key: str | None = None) -> list[float]:
    return [backoff.next(key) for _ in range(n)]


def test_the_delay_doubles_from_base_and_stays_at_the_cap() -> None:
    backoff = Backoff(base=1.0, cap=10.0)
    assert sequence(backoff, 6) == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert backoff.failures() == 6


def test_another_factor_grows_by_that_factor() -> None:
    backoff = Backoff(base=1.0, factor=1.5, cap=30.0)
    assert sequence(backoff, 10) == pytest.approx(
        [1.0, 1.5, 2.25, 3.375, 5.0625, 7.59375, 11.390625, 17.0859375, 25.62890625, 30.0]
    )


def test_a_key_that_failed_very_often_waits_the_cap_without_overflow() -> None:
    # 1.5 ** 5000 is beyond a float: the exponent stops once the cap is reached.
    backoff = Backoff(base=0.005, factor=1.5, cap=1000.0)
    assert sequence(backoff, 5000)[-1] == 1000.0


def test_failures_are_counted_per_key_and_reset_forgets_one_key() -> None:
    backoff = Backoff(base=1.0, cap=100.0)
    sequence(backoff, 3, "a")
    sequence(backoff, 2, "b")

    backoff.reset("a")

    assert (backoff.failures("a"), backoff.failures("b")) == (0, 2)
    assert backoff.next("a") == 1.0
    assert backoff.next("b") == 4.0
    # Resetting a key that never failed is harmless.
    backoff.reset("never")
    assert backoff.failures("never") == 0


def test_without_a_key_there_is_one_sequence() -> None:
    backoff = Backoff(base=0.5, cap=4.0)
    assert sequence(backoff, 3) == [0.5, 1.0, 2.0]
    backoff.reset()
    assert sequence(backoff, 2) == [0.5, 1.0]


@pytest.mark.parametrize(("draw", "factor"), [(0.0, 2 / 3), (0.5, 1.0), (1.0, 4 / 3)])
def test_jitter_multiplies_the_step_within_its_bounds(draw: float, factor: float) -> None:
    backoff = Backoff(base=0.8, cap=30.0, jitter=(2 / 3, 4 / 3), rand=lambda: draw)
    assert sequence(backoff, 3) == pytest.approx([0.8 * factor, 1.6 * factor, 3.2 * factor])


def test_jitter_never_takes_the_delay_past_the_cap() -> None:
    backoff = Backoff(base=0.8, cap=30.0, jitter=(2 / 3, 4 / 3), rand=lambda: 1.0)
    # 0.8 s doubling reaches the 30 s cap at the 7th failure; 30 s x 4/3 is still 30 s.
    assert sequence(backoff, 8)[-2:] == [30.0, 30.0]


def test_no_jitter_draws_no_random_number() -> None:
    def draw() -> float:
        raise AssertionError("a backoff without jitter must not draw")

    assert sequence(Backoff(base=1.0, cap=2.0, rand=draw), 2) == [1.0, 2.0]


@pytest.mark.parametrize(
    ("backoff", "expected"),
    [
        # client-go's work queue, per key: the cloud-node and lifecycle queues, then the
        # service controller's.
        (Backoff(base=0.005, cap=1000.0), [0.005, 0.01, 0.02, 0.04, 0.08]),
        (Backoff(base=5.0, cap=300.0), [5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 300.0, 300.0]),
        # The reviews' webhook backoff at its lowest draw (0.5 s, x1.5).
        (
            Backoff(base=0.5, factor=1.5, cap=10.0, jitter=(1.0, 1.2), rand=lambda: 0.0),
            [0.5, 0.75, 1.125, 1.6875],
        ),
        # The same at its highest draw: 20 % more.
        (
            Backoff(base=0.5, factor=1.5, cap=10.0, jitter=(1.0, 1.2), rand=lambda: 1.0),
            [0.6, 0.9, 1.35, 2.025],
        ),
    ],
    ids=["node-queue", "service-queue", "reviews-low", "reviews-high"],
)
def test_the_users_numbers(backoff: Backoff, expected: list[float]) -> None:
    assert sequence(backoff, len(expected)) == pytest.approx(expected)


@pytest.mark.parametrize(
    "build",
    [
        lambda: Backoff(base=0.0, cap=1.0),
        lambda: Backoff(base=2.0, cap=1.0),
        lambda: Backoff(base=1.0, cap=float("inf")),
        lambda: Backoff(base=1.0, cap=2.0, factor=1.0),
        lambda: Backoff(base=1.0, cap=2.0, jitter=(0.0, 1.0)),
        lambda: Backoff(base=1.0, cap=2.0, jitter=(1.2, 1.0)),
    ],
    ids=["zero-base", "cap-below-base", "no-cap", "no-growth", "zero-jitter", "jitter-reversed"],
)
def test_nonsensical_settings_are_refused(build: Callable[[], Backoff]) -> None:
    with pytest.raises(ValueError, match="need"):
        build()
