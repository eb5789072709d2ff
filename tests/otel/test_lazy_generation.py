"""A local generation's span is made at its end (cafe_otel._spans.lazy_span): the exported spans
are the ones made the other way, and whoever looks at the current span inside the call
gets the real one."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import cafe
import cafe.counter
from cafe_otel._spans.listener import SpanListener

from .conftest import span_tree
from .shift import seed_shift

ORIGIN = 1_700_000_000_000_000_000


def _spans(defer: bool, client=None):
    sink = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(sink))
    listener = SpanListener(provider, origin_unix_nano=ORIGIN, defer_local_generations=defer)
    seed_shift(cafe.Tracer(clock=cafe.TickClock(step=0.25), listeners=[listener]), client)
    return list(sink.get_finished_spans())


def _timed_tree(spans):
    by_id = {s.context.span_id: s for s in spans}
    return sorted((s.name, s.kind.name, s.start_time, s.end_time, dict(s.attributes),
                   by_id[s.parent.span_id].name if s.parent else None, [e.name for e in s.events])
                  for s in spans)


def test_made_at_the_end_or_at_the_start_the_spans_are_the_same():
    deferred, eager = _spans(True), _spans(False)
    assert span_tree(deferred) == span_tree(eager)
    assert _timed_tree(deferred) == _timed_tree(eager)  # times too, on a deterministic timeline
    assert [list(s.attributes) for s in deferred] == [list(s.attributes) for s in eager]  # and their order


class _Peeking:
    """A local client that, inside its call, adds to and looks at the current span."""

    def __init__(self) -> None:
        self.inner = cafe.counter.ScriptedClient()
        self.model, self.provider = self.inner.model, self.inner.provider
        self.seen: list[tuple[int, bool]] = []

    @property
    def calls(self) -> int:
        return self.inner.calls

    def chat(self, messages, tools=None, temperature=0.0, tool_choice=None):
        current = trace.get_current_span()
        current.set_attribute("gen_ai.request.max_tokens", 64)
        self.seen.append((current.get_span_context().span_id, current.is_recording()))
        return self.inner.chat(messages, tools, temperature, tool_choice)


def test_a_client_that_looks_at_the_current_span_gets_the_real_chat_span():
    client = _Peeking()
    spans = _spans(True, client)
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == len(client.seen) == 5
    assert [span_id for span_id, _ in client.seen] == [s.context.span_id for s in chats]
    assert all(recording for _, recording in client.seen)
    assert all(s.attributes["gen_ai.request.max_tokens"] == 64 for s in chats)
    # Made early, it keeps the start it would have had, and its end attributes.
    assert _timed_tree(spans) == _timed_tree(_spans(False, _Peeking()))
