"""Time a test owns, for code that takes a clock function and a sleep (pyccm.pacing, the
reviews' retries): sleeping moves the clock at once and is recorded."""

from __future__ import annotations


class FakeTime:
    def __init__(self, start: float = 100.0) -> None:
        self.now = start
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
