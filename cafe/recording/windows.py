"""Where a recording's calls sit in time: the shift's window and each call's, in epoch ns.

A call with `timing` sits where it was recorded. One without (a plain recording from
another harness) gets a synthetic, deterministic place: 1 ms long, 1 ms apart, after a 1 ms
lead-in from the header's clock origin (or 0). `cafe export`, `cafe view` and
the café example's replay waterfall all draw a recording on this timeline, so a span and a waterfall bar
of the same call agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from cafe.recording.format import Recording

SYNTHETIC_STEP_NS = 1_000_000


@dataclass(frozen=True)
class Window:
    start: int
    end: int


@dataclass(frozen=True)
class RecordedTimeline:
    shift: Window
    calls: list[Window]
    timed: bool  # some call carries its recorded timing; False: the whole timeline is synthetic


def call_windows(recording: Recording) -> RecordedTimeline:
    origin = recording.header.clock_origin_unix_nano or 0
    calls: list[Window] = []
    for position, call in enumerate(recording.calls):
        if call.timing is not None:
            start = call.timing.start_unix_nano
            calls.append(Window(start, start + call.timing.duration_ns))
        else:
            start = origin + (2 * position + 1) * SYNTHETIC_STEP_NS
            calls.append(Window(start, start + SYNTHETIC_STEP_NS))
    starts = [c.start for c in calls]
    timed = any(c.timing is not None for c in recording.calls)
    if recording.header.clock_origin_unix_nano is not None or not timed:
        shift_start = min([origin, *starts])
    else:
        shift_start = min(starts)
    shift_end = max([c.end for c in calls], default=shift_start)
    if not timed:
        shift_end += SYNTHETIC_STEP_NS  # close the synthetic shift a step after its last call
    return RecordedTimeline(Window(shift_start, shift_end), calls, timed)


class RecordedClock:
    """A tracer's clock for a replay, on the recording's timeline: a call's generation span
    starts and ends where the recorded call did, and every other reading is the latest
    recorded moment passed (the shift's start before the first call, a call's end after
    it). Readings are seconds since the shift's start, never going back.

    `RecordedTracingClient` tells it when a call begins and ends; the span's first reading
    inside a call is its start, the later ones its end."""

    def __init__(self, timeline: RecordedTimeline) -> None:
        self.origin_unix_nano = timeline.shift.start
        self._calls = timeline.calls
        self._served = 0
        self._current: Window | None = None
        self._readings_in_call = 0
        self._now = timeline.shift.start

    def __call__(self) -> float:
        at = self._now
        if self._current is not None:
            at = self._current.start if self._readings_in_call == 0 else self._current.end
            self._readings_in_call += 1
        self._now = max(self._now, at)
        return (self._now - self.origin_unix_nano) / 1e9

    def call_begins(self) -> None:
        self._current = self._calls[self._served] if self._served < len(self._calls) else None
        self._readings_in_call = 0

    def call_ends(self) -> None:
        if self._current is not None:
            self._now = max(self._now, self._current.end)
            self._served += 1
        self._current = None

    def __repr__(self) -> str:
        return f"RecordedClock(calls={len(self._calls)}, served={self._served})"
