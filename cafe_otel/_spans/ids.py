"""A deterministic id generator, for replays whose OTLP bytes must not change."""

from __future__ import annotations

import threading

from opentelemetry.sdk.trace.id_generator import IdGenerator


class SequentialIdGenerator(IdGenerator):
    """Trace and span ids 1, 2, 3, ... from `start` (ids must be non-zero). Not for live
    traffic: every process would reuse the same trace ids."""

    def __init__(self, start: int = 1) -> None:
        if start < 1:
            raise ValueError("ids must be non-zero: start at 1 or more")
        self._lock = threading.Lock()
        self._next_span = start
        self._next_trace = start

    def generate_span_id(self) -> int:
        with self._lock:
            value, self._next_span = self._next_span, self._next_span + 1
        return value

    def generate_trace_id(self) -> int:
        with self._lock:
            value, self._next_trace = self._next_trace, self._next_trace + 1
        return value
