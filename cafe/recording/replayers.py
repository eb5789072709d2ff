"""Replaying a recorded run into a tracer, by whoever knows how: the `cafe.replayers`
entry-point group.

A replayer is `replay(recording, tracer) -> bool`: it replays the recording's run (with zero
model calls) into `tracer`'s listeners and returns True, or returns False when the recording
is not one of its own. The café example registers one for its shifts, so `cafe export` draws a
shift's whole tree (shift, phases, tools) without the product knowing the café; a recording
no replayer claims is exported from its calls alone.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points

from cafe.recording.format import Recording
from cafe.trace.tracer import Tracer

Replayer = Callable[[Recording, Tracer], bool]
GROUP = "cafe.replayers"


def installed_replayers() -> list[Replayer]:
    """Every installed replayer, by entry-point name; one whose module is not installed (an
    example that was deleted) is left out."""
    found: list[Replayer] = []
    for entry in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        try:
            found.append(entry.load())
        except ModuleNotFoundError:
            continue
    return found


def replay_into(recording: Recording, tracer: Tracer,
                replayers: list[Replayer] | None = None) -> bool:
    """Replay `recording` into `tracer` with the first replayer that claims it; False when
    none does. What a replayer raises (a stale recording) is raised."""
    found = installed_replayers() if replayers is None else replayers
    return any(replayer(recording, tracer) for replayer in found)
