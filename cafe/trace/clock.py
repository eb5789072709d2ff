"""Clocks are inputs: a clock is a function that returns seconds. `TickClock` is the
deterministic stand-in for a monotonic clock; `Timeline` is a shift's real one, a monotonic
clock anchored at one wall-clock origin."""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], float]
NanoClock = Callable[[], int]


class TickClock:
    def __init__(self, step: float = 1.0, start: float = 0.0) -> None:
        if step <= 0:
            raise ValueError("TickClock step must be positive")
        self.step = step
        self._now = start

    def __call__(self) -> float:
        now = self._now
        self._now += self.step
        return now

    def __repr__(self) -> str:
        return f"TickClock(step={self.step}, now={self._now})"


class Timeline:
    """A shift's timeline: one origin on the wall clock, one monotonic clock from there.

    Each reading is the seconds since the origin, taken from the monotonic clock, and
    `unix_nano(reading)` places it on the wall clock. Given to the tracer as its clock, the
    timeline's latest reading is the start of the span opened last; the recorder, called from
    inside the generation span, takes that reading as the call's start, so a recording's call
    starts are its generation spans' starts, on one clock, rather than a second reading of
    another clock a few microseconds later.
    """

    def __init__(self, origin_unix_nano: int | None = None, monotonic_ns: NanoClock = time.perf_counter_ns) -> None:
        self.origin_unix_nano = time.time_ns() if origin_unix_nano is None else origin_unix_nano
        self._monotonic_ns = monotonic_ns
        self._start = monotonic_ns()
        self.latest = 0.0

    def __call__(self) -> float:
        self.latest = (self._monotonic_ns() - self._start) / 1e9
        return self.latest

    def unix_nano(self, reading: float) -> int:
        return self.origin_unix_nano + round(reading * 1_000_000_000)

    def __repr__(self) -> str:
        return f"Timeline(origin_unix_nano={self.origin_unix_nano}, latest={self.latest})"
