"""`EventLog`: a listener that keeps every event, in order (a test probe, or a buffer to
hand on later, as `cafe export` does once a replay has succeeded)."""

from __future__ import annotations

from cafe.trace.events import TraceEvent


class EventLog:
    def __init__(self) -> None:
        self.events: list[TraceEvent] = []

    def on_event(self, event: TraceEvent) -> None:
        self.events.append(event)

    def of(self, kind: type) -> list[TraceEvent]:
        return [event for event in self.events if isinstance(event, kind)]
