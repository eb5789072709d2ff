"""The Anthropic Messages reading: a request, a JSON message and a stream of events, as every
consumer reads them, in the GenAI conventions' shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonschema import Draft202012Validator

from cafe.apis import Operation, anthropic_messages, api_for, read_exchange

SCHEMAS = Path(__file__).resolve().parents[3] / "shared" / "semconv-1.41.1" / "docs" / "gen-ai"
API = anthropic_messages.API
PATH = "/v1/messages"
TOOLS = [{"name": "price_check", "description": "The price of an item.",
          "input_schema": {"type": "object", "properties": {"item": {"type": "string"}}}},
         {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}]
MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "A latte"},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "They want a price.", "signature": "sig"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "price_check", "input": {"item": "latte"}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"price_eur":1.6}'},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/menu.png"}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "Menu: latte 1.60"}},
        {"type": "text", "text": "And a croissant?", "cache_control": {"type": "ephemeral"}}]},
]
BODY: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 64, "system": [
    {"type": "text", "text": "You are a barista.", "cache_control": {"type": "ephemeral"}}],
    "messages": MESSAGES, "tools": TOOLS, "temperature": 0.2, "top_p": 0.9, "top_k": 5,
    "stop_sequences": ["###"], "thinking": {"type": "enabled", "budget_tokens": 1024}, "service_tier": "auto"}
ANSWER: dict[str, Any] = {
    "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "thinking", "thinking": "A croissant is 2.10.", "signature": "s2"},
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_2", "name": "price_check", "input": {"item": "croissant"}}],
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 20, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 7,
              "output_tokens": 30, "output_tokens_details": {"thinking_tokens": 12}, "service_tier": "standard"}}


def _validator(name: str) -> Draft202012Validator:
    path = SCHEMAS / f"gen-ai-{name}.json"
    if not path.is_file():
        pytest.skip("the pinned semantic conventions (semconv-1.41.1) are not beside this checkout")
    return Draft202012Validator(json.loads(path.read_text(encoding="utf-8")))


def _sse(*events: dict[str, Any]) -> list[tuple[int, bytes]]:
    return [(offset * 1000, f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
            for offset, event in enumerate(events)]


def _stream_of(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The events the Messages API streams `answer` as, in its order."""
    started = {**answer, "content": [], "stop_reason": None, "stop_sequence": None,
               "usage": {**answer["usage"], "output_tokens": 1}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": started}]
    for index, block in enumerate(answer["content"]):
        kind = block["type"]
        empty = {"thinking": {"type": "thinking", "thinking": "", "signature": ""},
                 "text": {"type": "text", "text": ""},
                 "tool_use": {"type": "tool_use", "id": block.get("id"), "name": block.get("name"), "input": {}}}[kind]
        events.append({"type": "content_block_start", "index": index, "content_block": empty})
        if index == 0:
            events.append({"type": "ping"})
        if kind == "thinking":
            for piece in block["thinking"].split(" "):
                events.append({"type": "content_block_delta", "index": index,
                               "delta": {"type": "thinking_delta", "thinking": piece + " "}})
            events.append({"type": "content_block_delta", "index": index,
                           "delta": {"type": "signature_delta", "signature": block["signature"]}})
        elif kind == "text":
            events.append({"type": "content_block_delta", "index": index,
                           "delta": {"type": "text_delta", "text": block["text"]}})
        else:
            written = json.dumps(block["input"])
            events.append({"type": "content_block_delta", "index": index,
                           "delta": {"type": "input_json_delta", "partial_json": ""}})
            for at in range(0, len(written), 5):
                events.append({"type": "content_block_delta", "index": index,
                               "delta": {"type": "input_json_delta", "partial_json": written[at:at + 5]}})
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": answer["stop_reason"], "stop_sequence": None},
                   "usage": {"output_tokens": answer["usage"]["output_tokens"]}})
    events.append({"type": "message_stop"})
    return events


def test_only_the_messages_path_is_read_not_counting_tokens_or_batches() -> None:
    assert api_for("POST", "/v1/messages") is API
    assert api_for("POST", "/anthropic/v1/messages") is API  # behind a gateway's prefix
    assert api_for("POST", "/v1/messages/count_tokens") is None
    assert api_for("POST", "/v1/messages/batches") is None
    assert api_for("GET", "/v1/messages") is None


def test_system_is_the_system_instructions_and_the_history_keeps_every_block_as_a_part() -> None:
    said = API.request_content(BODY)
    assert said.system_instructions == [{"type": "text", "content": "You are a barista."}]
    assert API.request_content({"system": "Be kind.", "messages": []}).system_instructions == [
        {"type": "text", "content": "Be kind."}]
    assert said.input_messages == [
        {"role": "user", "parts": [{"type": "text", "content": "A latte"}]},
        {"role": "assistant", "parts": [
            {"type": "reasoning", "content": "They want a price."},
            {"type": "text", "content": "Checking."},
            {"type": "tool_call", "id": "toolu_1", "name": "price_check", "arguments": {"item": "latte"}}]},
        {"role": "user", "parts": [
            {"type": "tool_call_response", "id": "toolu_1", "response": {"price_eur": 1.6}},
            {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "iVBORw0KGgo="},
            {"type": "uri", "modality": "image", "uri": "https://example.com/menu.png"},
            {"type": "blob", "modality": "document", "mime_type": "application/pdf", "content": "JVBERi0="},
            {"type": "text", "content": "Menu: latte 1.60"},
            {"type": "text", "content": "And a croissant?"}]},
    ]
    assert said.tool_definitions == [
        {"type": "function", "name": "price_check", "description": "The price of an item.",
         "parameters": TOOLS[0]["input_schema"]},
        {"type": "web_search_20250305", "name": "web_search"}]
    _validator("input-messages").validate(said.input_messages)
    _validator("system-instructions").validate(said.system_instructions)
    _validator("tool-definitions").validate(said.tool_definitions)


def test_a_tool_result_of_blocks_is_its_text_or_its_parts() -> None:
    texts = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [
        {"type": "text", "text": '{"ok":'}, {"type": "text", "text": " true}"}]}]}
    image = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": True, "content": [
        {"type": "text", "text": "a chart"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]}]}
    (first,), (second,) = (message["parts"] for message in anthropic_messages.input_messages([texts, image]))
    assert first == {"type": "tool_call_response", "id": "t", "response": {"ok": True}}
    assert second["response"] == [{"type": "text", "content": "a chart"},
                                  {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "AAAA"}]


def test_the_request_gives_each_parameter_the_conventions_name_and_no_openai_one() -> None:
    asked = API.request(BODY, host="api.anthropic.com")
    assert (asked.api, asked.operation, asked.provider, asked.model) == (
        "anthropic.messages", Operation.CHAT, "anthropic", "claude-sonnet-4-5")
    assert (asked.max_tokens, asked.temperature, asked.top_p, asked.top_k, asked.stop_sequences) == (
        64, 0.2, 0.9, 5.0, ("###",))
    assert (asked.stream, asked.service_tier, asked.seed, asked.choice_count) == (False, None, None, None)
    assert API.request({**BODY, "stream": True}, host=None).stream is True
    assert API.request({"output_config": {"format": {"type": "json_schema", "schema": {}}}}, host=None).output_type == (
        "json")


@pytest.mark.parametrize(("host", "provider"), [
    ("api.anthropic.com", "anthropic"), ("127.0.0.1", "anthropic"),
    ("bedrock-runtime.us-east-1.amazonaws.com", "aws.bedrock"),
    ("us-east5-aiplatform.googleapis.com", "gcp.vertex_ai"),
])
def test_the_provider_is_anthropic_or_the_service_its_host_names(host: str, provider: str) -> None:
    assert API.request(BODY, host=host).provider == provider


def test_usage_counts_the_cached_tokens_in_the_input_as_the_anthropic_span_says() -> None:
    usage = API.response(ANSWER, content=False).usage
    assert (usage.input_tokens, usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (127, 100, 7)
    assert (usage.output_tokens, usage.reasoning_output_tokens) == (30, 12)
    bare = API.response({**ANSWER, "usage": {"input_tokens": 9, "output_tokens": 2}}, content=False).usage
    assert (bare.input_tokens, bare.cache_read_input_tokens, bare.cache_creation_input_tokens) == (9, None, None)


def test_an_answer_gives_its_blocks_as_parts_and_keeps_the_raw_stop_reason() -> None:
    answer = API.response(ANSWER, content=True)
    assert (answer.id, answer.model, answer.finish_reasons) == ("msg_01", "claude-sonnet-4-5-20250929", ("tool_use",))
    assert answer.service_tier is None  # Anthropic's tier is not openai.response.service_tier
    assert [(call.id, call.name, call.arguments) for call in answer.tool_calls] == [
        ("toolu_2", "price_check", '{"item":"croissant"}')]
    assert answer.output_messages == [{"role": "assistant", "finish_reason": "tool_call", "parts": [
        {"type": "reasoning", "content": "A croissant is 2.10."},
        {"type": "text", "content": "Let me check."},
        {"type": "tool_call", "id": "toolu_2", "name": "price_check", "arguments": {"item": "croissant"}}]}]
    _validator("output-messages").validate(answer.output_messages)
    assert API.response(ANSWER, content=False).output_messages is None


@pytest.mark.parametrize(("raw", "mapped"), [
    ("end_turn", "stop"), ("stop_sequence", "stop"), ("pause_turn", "stop"), ("max_tokens", "length"),
    ("model_context_window_exceeded", "length"), ("tool_use", "tool_call"), ("refusal", "content_filter"),
    ("a_new_reason", "stop"), (None, "error"),
])
def test_each_stop_reason_maps_onto_the_conventions_enumeration(raw: str | None, mapped: str) -> None:
    answer = API.response({**ANSWER, "stop_reason": raw}, content=True)
    assert answer.output_messages is not None and answer.output_messages[0]["finish_reason"] == mapped
    assert answer.finish_reasons == ((raw,) if raw else ())
    _validator("output-messages").validate(answer.output_messages)


def test_a_stream_reads_as_the_message_it_adds_up_to() -> None:
    events = _stream_of(ANSWER)
    call = read_exchange(api_for("POST", PATH), "POST", PATH, status=200, request={**BODY, "stream": True},
                         stream=_sse(*events))
    assert call.label == "chat claude-sonnet-4-5" and call.first_chunk_ns == 0
    streamed, whole = call.response, API.response(ANSWER, content=True)
    assert streamed.output_messages == [{**whole.output_messages[0], "parts": [  # type: ignore[index]
        {"type": "reasoning", "content": "A croissant is 2.10. "}, *whole.output_messages[0]["parts"][1:]]}]  # type: ignore[index]
    assert (streamed.id, streamed.model, streamed.finish_reasons, streamed.usage) == (
        whole.id, whole.model, whole.finish_reasons, whole.usage)
    assert [(call.name, call.arguments) for call in streamed.tool_calls] == [("price_check", '{"item": "croissant"}')]
    document = API.assembled(events)
    assert document is not None and document["content"][2]["input"] == {"item": "croissant"}
    assert document["content"][0] == {"type": "thinking", "thinking": "A croissant is 2.10. ", "signature": "s2"}
    assert (document["stop_reason"], document["usage"]["output_tokens"], document["usage"]["input_tokens"]) == (
        "tool_use", 30, 20)
    assert API.response(document, content=True).output_messages == streamed.output_messages


def test_a_message_deltas_usage_replaces_the_starts_field_by_field() -> None:
    events = _stream_of({**ANSWER, "usage": {"input_tokens": 5, "cache_read_input_tokens": 3, "output_tokens": 9}})
    events[-2]["usage"] = {"input_tokens": 6, "output_tokens": 9}  # cumulative: replaces, never adds
    reading = API.stream(content=False)
    for event in events:
        reading.event(event)
    usage = reading.result().usage
    assert (usage.input_tokens, usage.cache_read_input_tokens, usage.output_tokens) == (9, 3, 9)


def test_without_content_a_stream_decodes_only_the_events_that_carry_metadata() -> None:
    events = _stream_of(ANSWER)
    reading = API.stream(content=False)
    wanted = []
    for event in events:
        if reading.wants(json.dumps(event).encode()):
            wanted.append(event["type"])
            reading.event(event)
    assert wanted == ["message_start", "content_block_start", "content_block_start", "content_block_start",
                      "message_delta"]
    assert not reading.wants(b'{"type":"content_block_delta","index":0,'
                             b'"delta":{"type":"text_delta","text":"\\"type\\":\\"message_delta\\""}}')
    answer = reading.result()
    assert (answer.id, answer.finish_reasons, answer.usage.input_tokens, answer.usage.output_tokens) == (
        "msg_01", ("tool_use",), 127, 30)
    assert [(call.id, call.name, call.arguments) for call in answer.tool_calls] == [("toolu_2", "price_check", None)]
    assert answer.output_messages is None


def test_an_error_event_fails_the_stream_with_anthropics_error_type() -> None:
    events = [*_stream_of(ANSWER)[:4],
              {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}]
    call = read_exchange(API, "POST", PATH, status=200, request={**BODY, "stream": True}, stream=_sse(*events))
    answer = call.response
    assert answer.error_type == "overloaded_error" and answer.finish_reasons == ()
    assert answer.output_messages is not None and answer.output_messages[0]["finish_reason"] == "error"
    _validator("output-messages").validate(answer.output_messages)
    assert API.assembled(events) == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert API.response({"type": "error", "error": {"type": "rate_limit_error"}}, content=True).error_type == (
        "rate_limit_error")


def test_a_stream_cut_short_keeps_the_tool_input_it_got_as_text() -> None:
    events = [event for event in _stream_of(ANSWER) if event["type"] not in ("message_delta", "message_stop")]
    cut = [*events[:-3], events[-1]]  # the tool's input stops half-way
    document = API.assembled(cut)
    assert document is not None and isinstance(document["content"][2]["input"], str)
    assert document["stop_reason"] is None
    answer = read_exchange(API, "POST", PATH, status=200, request=BODY,
                           stream=[(0, b"data: " + orjson.dumps(event) + b"\n\n") for event in cut]).response
    assert answer.output_messages is not None and answer.output_messages[0]["finish_reason"] == "error"


def test_the_summary_names_the_messages_without_their_text() -> None:
    assert API.summary(BODY) == "3 message(s), the last from user"
    assert API.summary({"messages": []}) == "no messages"
