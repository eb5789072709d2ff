"""Acceptance: with content capture off no exported byte carries conversation text; with
it on, the messages appear in the convention's JSON shape."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import cafe
from cafe import counter
from cafe_otel import AdvancedOptions, configure, encode

CUSTOMER = "CANARY-CUSTOMER-7f3a I want the secret menu"
SYSTEM = "CANARY-SYSTEM-51c2 You are a barista."
OUTPUT_1 = "CANARY-OUTPUT-a9e1 let me look"
OUTPUT_2 = "CANARY-OUTPUT-0b7d sorry, no such item"
ARGUMENT = "CANARY-ARGUMENT-4d2e"  # an item no menu holds: invalid, echoed in the result
BAD_JSON = "CANARY-BADJSON-88f0 {"  # arguments that are not JSON
EXCEPTION = "CANARY-EXCEPTION-c3d9 the customer said"
CANARIES = ("CANARY",)  # every planted string starts with it


def _replies() -> list[dict]:
    return [
        {"content": OUTPUT_1, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "price_check", "arguments": json.dumps({"item": ARGUMENT})}},
            {"id": "c2", "type": "function", "function": {"name": "check_allergens", "arguments": BAD_JSON}},
        ]},
        {"content": OUTPUT_2},
    ]


class _Exploding(counter.ScriptedClient):
    def chat(self, *args, **kwargs):
        raise ValueError(EXCEPTION)


def _run_shifts(**options) -> tuple[bytes, list]:
    sink = InMemorySpanExporter()
    handle = configure(exporter=sink, environ={}, **options)
    run = counter.run_shift(counter.CannedClient(_replies()), [CUSTOMER], counter.make_responder([]),
                         tracer=handle.tracer(), system_prompt=SYSTEM)
    assert run.stop_reason == "answered"
    # The canary really is in the shift: in the tool results the model saw.
    assert any(ARGUMENT in str(m.get("content")) for m in run.messages if m["role"] == "tool")
    with pytest.raises(ValueError):
        counter.run_shift(_Exploding(), [CUSTOMER], counter.make_responder([]), tracer=handle.tracer(),
                       system_prompt=SYSTEM)
    handle.shutdown(2.0)
    assert handle.account.dropped == 0
    spans = list(sink.get_finished_spans())
    return encode(spans), spans


@pytest.mark.parametrize("metadata_only", [True, False], ids=["processor-on", "mapping-alone"])
def test_no_exported_byte_holds_customer_text_with_capture_off(metadata_only):
    data, spans = _run_shifts(advanced=AdvancedOptions(metadata_only=metadata_only))
    assert len(spans) > 10
    for canary in CANARIES:
        assert canary.encode() not in data
    # Sanity: the spans are there, and the failures are described by type only.
    errors = [s for s in spans if s.attributes.get("error.type") == "ValueError"]
    assert errors and all(e.status.description is None for e in errors)
    tool_statuses = sorted(s.attributes["cafe.tool.status"] for s in spans if "cafe.tool.status" in s.attributes)
    assert tool_statuses == ["invalid", "invalid"]


def test_capture_on_puts_messages_on_spans_in_the_convention_shape():
    data, spans = _run_shifts(capture_content="SPAN_ONLY")
    assert b"CANARY" in data  # the switch really switches
    chat = next(s for s in spans if s.attributes.get("gen_ai.response.id") == "canned-1")
    assert chat.name == "chat canned-barista-1"
    # The system prompt is part of the chat history: it stays there (MLflow reads it from there).
    assert json.loads(chat.attributes["gen_ai.input.messages"]) == [
        {"role": "system", "parts": [{"type": "text", "content": SYSTEM}]},
        {"role": "user", "parts": [{"type": "text", "content": CUSTOMER}]}]
    assert "gen_ai.system_instructions" not in chat.attributes
    assert json.loads(chat.attributes["gen_ai.output.messages"]) == [{
        "role": "assistant", "finish_reason": "tool_call", "parts": [
            {"type": "text", "content": OUTPUT_1},
            {"type": "tool_call", "id": "c1", "name": "price_check", "arguments": {"item": ARGUMENT}},
            {"type": "tool_call", "id": "c2", "name": "check_allergens", "arguments": BAD_JSON},
        ]}]
    tool = next(s for s in spans if s.attributes.get("gen_ai.tool.call.id") == "c1")
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"item": ARGUMENT}
    assert ARGUMENT in json.loads(tool.attributes["gen_ai.tool.call.result"])["problems"][0]
    bad = next(s for s in spans if s.attributes.get("gen_ai.tool.call.id") == "c2")
    assert bad.attributes["gen_ai.tool.call.arguments"] == BAD_JSON
    assert "not valid JSON" in json.loads(bad.attributes["gen_ai.tool.call.result"])["problems"][0]
    second = next(s for s in spans if s.attributes.get("gen_ai.response.id") == "canned-2")
    history = json.loads(second.attributes["gen_ai.input.messages"])
    assert [m["role"] for m in history] == ["system", "user", "assistant", "tool", "tool"]
    assert history[3]["parts"][0]["type"] == "tool_call_response"
    # Capture opens the GenAI content keys only: exception messages and stack traces are
    # still removed by the metadata processor.
    failed = next(s for s in spans if s.attributes.get("error.type") == "ValueError" and s.name.startswith("chat"))
    assert dict(failed.events[0].attributes) == {"exception.type": "ValueError"}
    assert EXCEPTION.encode() not in data


def test_capture_without_the_processor_records_the_whole_exception():
    _, spans = _run_shifts(capture_content=True, advanced=AdvancedOptions(metadata_only=False))
    failed = next(s for s in spans if s.attributes.get("error.type") == "ValueError" and s.name.startswith("chat"))
    assert failed.events[0].attributes["exception.message"] == EXCEPTION


def test_event_only_capture_puts_no_content_on_spans_and_no_span_event_in_for_the_log_record():
    # The spec's content event is a log record with structured content (the logs pipeline,
    # tests/otel/test_instrumentation.py): a span event with JSON strings is not it.
    data, spans = _run_shifts(capture_content="EVENT_ONLY")
    chat = next(s for s in spans if s.attributes.get("gen_ai.response.id") == "canned-1")
    assert "gen_ai.input.messages" not in chat.attributes
    assert all(e.name != "gen_ai.client.inference.operation.details" for s in spans for e in s.events)
    assert b"CANARY" not in data
    handle = configure(environ={}, capture_content="EVENT_ONLY", set_global=False, metrics=False)
    assert handle.logger_provider is not None  # the OTLP logs exporter, where the spans go
    assert "no content event" not in handle.account.summary()
    handle.shutdown(0.5)
    # Handed the span exporter, the caller chose where telemetry goes: the event needs its own.
    handle = configure(exporter=InMemorySpanExporter(), environ={}, capture_content="EVENT_ONLY", set_global=False)
    assert handle.logger_provider is None
    assert "no content event is emitted (exporter= was given without AdvancedOptions(log_exporter=...))" in (
        handle.account.summary())
    handle.shutdown(1.0)


def test_tool_spans_carry_arguments_and_result_at_their_own_end_time():
    sink = InMemorySpanExporter()
    handle = configure(exporter=sink, environ={}, capture_content=True)
    origin = 1_700_000_000_000_000_000
    tracer = handle.tracer(cafe.TickClock(), origin_unix_nano=origin)
    counter.run_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, counter.make_responder([]), tracer=tracer)
    handle.shutdown(2.0)
    nodes = {node.attrs["call_id"]: node for node in tracer.nodes("tool")}
    tools = [s for s in sink.get_finished_spans() if s.name == "execute_tool price_check"]
    assert len(tools) == 2
    for span in tools:
        node = nodes[span.attributes["gen_ai.tool.call.id"]]
        assert span.end_time == origin + round(node.end * 1e9)
        assert json.loads(span.attributes["gen_ai.tool.call.result"])["item"] in ("latte", "chocolate croissant")
        assert json.loads(span.attributes["gen_ai.tool.call.arguments"])["item"] in ("latte", "chocolate croissant")
    chats = [s for s in sink.get_finished_spans() if s.name.startswith("chat ")]
    offered = {tool["name"] for tool in json.loads(chats[0].attributes["gen_ai.tool.definitions"])}
    assert offered == {"price_check", "check_allergens", "propose_order", "fire_ticket", "close_check"}


@pytest.mark.parametrize("capture, kept", [(False, False), (True, True)])
def test_a_metadata_only_tracer_does_not_copy_inputs_it_will_never_export(capture, kept):
    handle = configure(exporter=InMemorySpanExporter(), environ={}, capture_content=capture)
    tracer = handle.tracer()
    counter.run_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, counter.make_responder([]), tracer=tracer)
    handle.shutdown(1.0)
    inputs = [node.generation.input for node in tracer.generations()]
    assert len(inputs) == 4  # the order is rejected: priced, noted, proposed, answered
    assert all(bool(messages) is kept for messages in inputs)
    if kept:
        assert inputs[0][1]["content"] == counter.DEFAULT_SCRIPT[0]
