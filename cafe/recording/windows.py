"""Where a recording's calls sit in time: the shift's window and each call's, in epoch ns.

A call with `timing` sits where it was recorded. One without (a plain recording from
another harness) gets a synthetic, deterministic place: 1 ms long, 1 ms apart, after a 1 ms
lead-in from the header's clock origin (or 0). `cafe export` and `cafe view` both draw a
recording on this timeline, so a span and a waterfall bar of the same call agree.
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
