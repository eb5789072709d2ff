"""Clocks are inputs. `TickClock` is the deterministic stand-in for a monotonic clock:
each reading is the previous one plus `step`, so two runs render identical trees."""

from __future__ import annotations

from collections.abc import Callable

Clock = Callable[[], float]


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
