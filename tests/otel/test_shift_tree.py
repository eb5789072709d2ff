"""Acceptance: the seed's two-line shift (an order priced, proposed, approved and fired) as
OpenTelemetry spans, tree and totals."""

from __future__ import annotations

from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import cafe
import cafe.counter
import cafe_otel
from cafe_otel import SCHEMA_URL, OTelTracer

from .conftest import span_tree
from .shift import seed_shift

MODEL, PROVIDER = "scripted-barista-1", "cafe.scripted"
ORIGIN = 1_700_000_000_000_000_000

CHAT = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": PROVIDER,
        "gen_ai.request.model": MODEL, "gen_ai.request.temperature": 0.0,
        "gen_ai.conversation.id": "shift-1", "gen_ai.response.model": MODEL}

EXPECTED_TREE = [
    ("invoke_agent cafe-counter", "INTERNAL", {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": PROVIDER,
        "gen_ai.agent.name": "cafe-counter", "gen_ai.conversation.id": "shift-1",
        "gen_ai.request.model": MODEL, "cafe.stop_reason": "answered", "cafe.shift.turns": 5,
        "cafe.shift.tickets": 1,
        # The agent span sums up its five model calls; the last one's finish reasons.
        "gen_ai.usage.input_tokens": 340, "gen_ai.usage.output_tokens": 54, "gen_ai.request.temperature": 0.0,
        "gen_ai.response.finish_reasons": ("stop",),
    }, [
        ("setup", "INTERNAL", {"cafe.phase": "setup"}, []),
        ("turn 1", "INTERNAL", {"cafe.phase": "turn", "cafe.turn": 1}, [
            (f"chat {MODEL}", "CLIENT", {
                **CHAT, "cafe.turn": 1, "gen_ai.response.id": "scripted-1",
                "gen_ai.response.finish_reasons": ("tool_calls",),
                "gen_ai.usage.input_tokens": 60, "gen_ai.usage.output_tokens": 12,
                "cafe.gen_ai.tool_calls": ("price_check", "price_check"),
            }, []),
            ("execute_tool price_check", "INTERNAL", {
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "price_check",
                "gen_ai.tool.call.id": "call_1_1", "gen_ai.tool.type": "function", "cafe.turn": 1,
                "cafe.tool.status": "ok",
            }, []),
            ("execute_tool price_check", "INTERNAL", {
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "price_check",
                "gen_ai.tool.call.id": "call_1_2", "gen_ai.tool.type": "function", "cafe.turn": 1,
                "cafe.tool.status": "ok",
            }, []),
        ]),
        ("turn 2", "INTERNAL", {"cafe.phase": "turn", "cafe.turn": 2}, [
            (f"chat {MODEL}", "CLIENT", {
                **CHAT, "cafe.turn": 2, "gen_ai.response.id": "scripted-2",
                "gen_ai.response.finish_reasons": ("stop",),
                "gen_ai.usage.input_tokens": 80, "gen_ai.usage.output_tokens": 9,
            }, []),
        ]),
        ("turn 3", "INTERNAL", {"cafe.phase": "turn", "cafe.turn": 3}, [
            (f"chat {MODEL}", "CLIENT", {
                **CHAT, "cafe.turn": 3, "gen_ai.response.id": "scripted-3",
                "gen_ai.response.finish_reasons": ("tool_calls",),
                "gen_ai.usage.input_tokens": 60, "gen_ai.usage.output_tokens": 12,
                "cafe.gen_ai.tool_calls": ("propose_order",),
            }, []),
            ("execute_tool propose_order", "INTERNAL", {
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "propose_order",
                "gen_ai.tool.call.id": "call_3_1", "gen_ai.tool.type": "function", "cafe.turn": 3,
                "cafe.tool.status": "approved",
            }, []),
        ]),
        ("turn 4", "INTERNAL", {"cafe.phase": "turn", "cafe.turn": 4}, [
            (f"chat {MODEL}", "CLIENT", {
                **CHAT, "cafe.turn": 4, "gen_ai.response.id": "scripted-4",
                "gen_ai.response.finish_reasons": ("tool_calls",),
                "gen_ai.usage.input_tokens": 60, "gen_ai.usage.output_tokens": 12,
                "cafe.gen_ai.tool_calls": ("fire_ticket",),
            }, []),
            ("execute_tool fire_ticket", "INTERNAL", {
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fire_ticket",
                "gen_ai.tool.call.id": "call_4_1", "gen_ai.tool.type": "function", "cafe.turn": 4,
                "cafe.tool.status": "fired", "cafe.ticket.number": 1,
            }, []),
        ]),
        ("turn 5", "INTERNAL", {"cafe.phase": "turn", "cafe.turn": 5, "cafe.stop_reason": "answered"}, [
            (f"chat {MODEL}", "CLIENT", {
                **CHAT, "cafe.turn": 5, "gen_ai.response.id": "scripted-5",
                "gen_ai.response.finish_reasons": ("stop",),
                "gen_ai.usage.input_tokens": 80, "gen_ai.usage.output_tokens": 9,
            }, []),
        ]),
        ("wrapup", "INTERNAL", {"cafe.phase": "wrapup"}, []),
    ]),
]


def test_seed_shift_span_tree_equals_the_expected_tree(telemetry):
    tracer = telemetry.handle.tracer(cafe.TickClock(), origin_unix_nano=ORIGIN)
    run = seed_shift(tracer)
    assert run.stop_reason == "answered"
    spans = telemetry.spans()
    assert span_tree(spans) == EXPECTED_TREE
    # One trace, every span ended, parents exported too, no errors, our pinned scope.
    assert len({s.context.trace_id for s in spans}) == 1
    ids = {s.context.span_id for s in spans}
    assert all(s.parent is None or s.parent.span_id in ids for s in spans)
    assert all(s.status.status_code is StatusCode.UNSET for s in spans)
    assert {s.instrumentation_scope.schema_url for s in spans} == {SCHEMA_URL}
    assert {s.instrumentation_scope.name for s in spans} == {"cafe_otel"}


def test_timestamps_follow_the_cafe_clock_on_an_explicit_timeline(telemetry):
    tracer = telemetry.handle.tracer(cafe.TickClock(step=0.5), origin_unix_nano=ORIGIN)
    seed_shift(tracer)
    spans = {s.context.span_id: s for s in telemetry.spans()}
    root = next(s for s in spans.values() if s.parent is None)
    assert root.start_time == ORIGIN  # the first tick is reading 0
    node = tracer.roots[0]
    assert root.end_time == ORIGIN + round(node.end * 1e9)
    # Every span, not only the root, sits where its cafe node does on that timeline.
    expected = sorted((ORIGIN + round(n.start * 1e9), ORIGIN + round(n.end * 1e9)) for n in tracer.nodes())
    assert sorted((s.start_time, s.end_time) for s in spans.values()) == expected


def test_token_totals_equal_usage_of(telemetry):
    tracer = telemetry.handle.tracer()
    seed_shift(tracer)
    usage = cafe.usage_of(tracer)
    chats = [s for s in telemetry.spans() if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(chats) == usage.calls == 5
    assert sum(s.attributes["gen_ai.usage.input_tokens"] for s in chats) == usage.input_tokens == 340
    assert sum(s.attributes["gen_ai.usage.output_tokens"] for s in chats) == usage.output_tokens == 54


def test_the_harness_tree_is_unchanged_by_the_otel_tracer(telemetry):
    plain, mirrored = cafe.Tracer(clock=cafe.TickClock()), telemetry.handle.tracer(cafe.TickClock())
    seed_shift(plain)
    seed_shift(mirrored)
    assert plain.render() == mirrored.render()


class _InstrumentedClient:
    """A client whose call is traced by a third-party instrumentation on the same provider."""

    def __init__(self, provider: TracerProvider) -> None:
        self.inner = cafe.counter.ScriptedClient()
        self.model, self.provider = self.inner.model, self.inner.provider
        self._tracer = provider.get_tracer("third.party.http")

    @property
    def calls(self) -> int:
        return self.inner.calls

    def chat(self, messages, tools=None, temperature=0.0, tool_choice=None):
        with self._tracer.start_as_current_span("POST /v1/chat/completions"):
            return self.inner.chat(messages, tools, temperature, tool_choice)


def test_a_third_party_span_during_a_generation_nests_under_the_chat_span():
    sink = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(sink))
    seed_shift(OTelTracer(provider), client=_InstrumentedClient(provider))
    spans = sink.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}
    http = [s for s in spans if s.name == "POST /v1/chat/completions"]
    assert len(http) == 5
    for span in http:
        assert by_id[span.parent.span_id].name == "chat scripted-barista-1"
        assert span.context.trace_id == by_id[span.parent.span_id].context.trace_id


def test_context_is_restored_after_the_shift():
    from opentelemetry import trace

    provider = TracerProvider()
    before = trace.get_current_span()
    seed_shift(OTelTracer(provider))
    assert trace.get_current_span() is before


def test_an_exception_sets_error_type_status_and_an_exception_event(telemetry):
    class Boom(RuntimeError):
        pass

    class FailingClient(cafe.counter.ScriptedClient):
        def chat(self, *args, **kwargs):
            raise Boom("the model endpoint fell over")

    tracer = telemetry.handle.tracer()
    try:
        seed_shift(tracer, client=FailingClient())
    except Boom:
        pass
    else:  # pragma: no cover
        raise AssertionError("the shift should have raised")
    spans = {s.name: s for s in telemetry.spans()}
    for name in ("chat scripted-barista-1", "turn 1", "invoke_agent cafe-counter"):
        span = spans[name]
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description is None
        assert span.attributes["error.type"] == "Boom"
        # exception.type is the fully qualified class; error.type the café's own short name.
        qualified = f"{__name__}.test_an_exception_sets_error_type_status_and_an_exception_event.Boom"
        assert [(e.name, dict(e.attributes)) for e in span.events] == [("exception", {"exception.type": qualified})]


def test_a_failing_span_listener_is_counted_in_the_account_and_the_shift_goes_on():
    """The tracer isolates the span listener: a provider whose tracer raises costs spans,
    counted as listener errors (class name only), never the shift."""

    class Broken(RuntimeError):
        pass

    class BrokenTracer(trace_api.NoOpTracer):
        def start_span(self, *args, **kwargs):
            raise Broken("the customer said: a latte")

    account = cafe_otel.TelemetryAccount()
    tracer = OTelTracer(BrokenTracer(), account=account)
    run = seed_shift(tracer)
    assert run.stop_reason == "answered"
    assert len(tracer.nodes()) == 17  # the tree listener still heard everything
    assert tracer.listener_failures == 17 == account.snapshot().listener_errors
    assert "latte" not in account.summary() and "Broken" in account.summary()
    assert "17 listener errors" in account.summary()
