"""Shared helpers for the cafe_otel tests: an in-memory telemetry setup and span trees."""

from __future__ import annotations

import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cafe_otel import BatchOptions, TelemetryHandle, configure

SEED_DECISIONS = [("approve", None)]


@dataclass
class Telemetry:
    handle: TelemetryHandle
    sink: InMemorySpanExporter

    def spans(self) -> list[ReadableSpan]:
        assert self.handle.force_flush(5.0)
        return list(self.sink.get_finished_spans())


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    sink = InMemorySpanExporter()
    handle = configure(exporter=sink, environ={}, batch=BatchOptions(schedule_delay=0.05))
    yield Telemetry(handle, sink)
    handle.shutdown(2.0)


SEED_CONVERSATION_ID = "shift-1"  # given, so that two runs of the seed shift compare equal


def span_tree(spans: Sequence[ReadableSpan], *, keys: bool = False) -> list[tuple]:
    """Spans as nested (name, kind, attributes, children) tuples, children in start order
    (the span id breaks ties: ids are sequential or random, starts are what orders)."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        by_parent.setdefault(parent, []).append(span)

    def build(parent: int | None) -> list[tuple]:
        children = sorted(by_parent.get(parent, []), key=lambda s: s.start_time)
        return [(s.name, s.kind.name, dict(s.attributes or {}), build(s.context.span_id)) for s in children]

    return build(None)


def closed_port() -> int:
    """A 127.0.0.1 port nobody listens on (bound, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
