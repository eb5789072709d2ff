"""The Responses reading: a request, a JSON answer and a stream of `response.*` events, as every
consumer reads them, in the shapes of the GenAI conventions' published JSON schemas."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from cafe.apis import Operation, api_for, assembled, openai_responses, read_exchange, request_summary
from tests.genai_schemas import INPUT_MESSAGES, OUTPUT_MESSAGES, SYSTEM_INSTRUCTIONS, TOOL_DEFINITIONS, valid
from tests.wire.responses_server import ResponsesServer, events

TOOLS = [
    {"type": "function", "name": "price_check", "description": "The price of an item", "strict": True,
     "parameters": {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"],
                    "additionalProperties": False}},
    {"type": "web_search"},
    {"type": "mcp", "server_label": "menu", "server_url": "https://mcp.example", "headers": {"Authorization": "k"}},
]
# A conversation as the Agents SDK sends it back: the user's message, the model's reasoning
# and tool call, the tool's output, and a message with an image and a file.
INPUT: list[dict[str, Any]] = [
    {"role": "developer", "content": "Prices in euros."},
    {"role": "user", "content": [{"type": "input_text", "text": "A latte"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Look it up."}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "price_check",
     "arguments": '{"item":"latte"}'},
    {"type": "function_call_output", "call_id": "call_1", "output": '{"price_eur":1.6}'},
    {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
     "content": [{"type": "output_text", "text": "1.60", "annotations": []}]},
    {"role": "user", "content": [
        {"type": "input_image", "detail": "auto", "image_url": "data:image/png;base64,iVBORw0K"},
        {"type": "input_image", "detail": "auto", "image_url": "https://example.com/menu.png"},
        {"type": "input_file", "file_id": "file-1"},
        {"type": "input_text", "text": "And this?"}]},
]


def test_instructions_are_system_instructions_and_the_input_items_are_messages() -> None:
    said = openai_responses.API.request_content({"instructions": "Be kind.", "input": INPUT, "tools": TOOLS})
    assert valid(SYSTEM_INSTRUCTIONS, said.system_instructions) == [
        {"type": "text", "content": "Be kind."}]
    assert valid(INPUT_MESSAGES, said.input_messages) == [
        {"role": "developer", "parts": [{"type": "text", "content": "Prices in euros."}]},
        {"role": "user", "parts": [{"type": "text", "content": "A latte"}]},
        {"role": "assistant", "parts": [
            {"type": "reasoning", "content": "Look it up."},
            {"type": "tool_call", "id": "call_1", "name": "price_check", "arguments": {"item": "latte"}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": {"price_eur": 1.6}}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "1.60"}]},
        {"role": "user", "parts": [
            {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "iVBORw0K"},
            {"type": "uri", "modality": "image", "uri": "https://example.com/menu.png"},
            {"type": "file", "modality": "document", "file_id": "file-1"},
            {"type": "text", "content": "And this?"}]},
    ]
    assert valid(TOOL_DEFINITIONS, said.tool_definitions) == [
        {"type": "function", "name": "price_check", "description": "The price of an item",
         "parameters": TOOLS[0]["parameters"]},
        {"type": "web_search", "name": "web_search"},
        {"type": "mcp", "name": "menu"},  # an MCP server by its label: never its headers
    ]


def test_a_string_input_is_one_user_message() -> None:
    said = openai_responses.API.request_content({"input": "A latte"})
    assert said.input_messages == [{"role": "user", "parts": [{"type": "text", "content": "A latte"}]}]
    assert said.system_instructions == [] and said.tool_definitions == []


def test_the_request_gives_every_parameter_the_conventions_name_and_only_those_it_sets() -> None:
    asked = openai_responses.API.request(
        {"model": "gpt-4.1", "input": "hi", "max_output_tokens": 50, "temperature": 0, "top_p": 0.5, "stream": True,
         "text": {"format": {"type": "json_schema", "name": "order", "schema": {}}}, "service_tier": "flex",
         "previous_response_id": "resp_1", "conversation": {"id": "conv_1"}}, host="x.openai.azure.com")
    assert (asked.api, asked.operation, asked.provider, asked.model, asked.stream) == (
        "openai.responses", Operation.CHAT, "azure.ai.openai", "gpt-4.1", True)
    assert (asked.max_tokens, asked.temperature, asked.top_p, asked.output_type, asked.service_tier) == (
        50, 0.0, 0.5, "json", "flex")
    assert (asked.conversation_id, asked.previous_response_id) == ("conv_1", "resp_1")
    bare = openai_responses.API.request({"model": "m", "input": "hi", "conversation": "conv_2"}, host="127.0.0.1")
    assert (bare.provider, bare.max_tokens, bare.temperature, bare.stream, bare.output_type) == (
        "openai", None, None, False, None)
    assert bare.conversation_id == "conv_2"


def test_only_the_call_that_makes_a_response_is_read() -> None:
    assert api_for("POST", "/v1/responses") is openai_responses.API
    assert api_for("POST", "/openai/v1/responses") is openai_responses.API
    for method, path in (("GET", "/v1/responses/resp_1"), ("POST", "/v1/responses/resp_1/cancel"),
                         ("GET", "/v1/responses/resp_1/input_items"), ("DELETE", "/v1/responses/resp_1")):
        assert api_for(method, path) is None, (method, path)


def _answer(body: dict[str, Any]) -> dict[str, Any]:
    status, document = ResponsesServer().answer(body)
    assert status == 200
    return document


def test_an_answer_gives_its_usage_output_and_tool_calls() -> None:
    document = _answer({"model": "gpt-4.1", "input": "A latte", "tools": TOOLS[:1],
                        "reasoning": {"effort": "low", "summary": "auto"}})
    document["usage"]["input_tokens_details"] = {"cached_tokens": 4, "cache_write_tokens": 2}
    answer = openai_responses.API.response(document, content=True)
    assert (answer.id, answer.model, answer.service_tier) == (document["id"], "gpt-4.1-2025-04-14", "default")
    usage = document["usage"]
    assert (answer.usage.input_tokens, answer.usage.output_tokens, answer.usage.cache_read_input_tokens,
            answer.usage.cache_creation_input_tokens, answer.usage.reasoning_output_tokens) == (
        usage["input_tokens"], usage["output_tokens"], 4, 2, usage["output_tokens_details"]["reasoning_tokens"])
    assert answer.usage.reasoning_output_tokens and answer.finish_reasons == ("tool_call",)
    call = document["output"][1]
    assert [(c.id, c.name, c.arguments) for c in answer.tool_calls] == [(call["call_id"], "price_check",
                                                                         call["arguments"])]
    assert valid(OUTPUT_MESSAGES, answer.output_messages) == [{
        "role": "assistant", "finish_reason": "tool_call", "parts": [
            {"type": "reasoning", "content": document["output"][0]["summary"][0]["text"]},
            {"type": "tool_call", "id": call["call_id"], "name": "price_check", "arguments": {"item": "latte"}}]}]
    assert openai_responses.API.response(document, content=False).output_messages is None


@pytest.mark.parametrize(("status", "details", "output", "finish"), [
    ("completed", None, [{"type": "message", "content": []}], "stop"),
    ("completed", None, [{"type": "function_call", "call_id": "c", "name": "n", "arguments": "{}"}], "tool_call"),
    ("completed", None, [{"type": "web_search_call", "id": "ws"}], "stop"),
    ("incomplete", {"reason": "max_output_tokens"}, [], "length"),
    ("incomplete", {"reason": "content_filter"}, [], "content_filter"),
    ("incomplete", {"reason": "max_messages"}, [], "max_messages"),
    ("incomplete", None, [], "length"),
    ("failed", None, [], "error"),
    ("cancelled", None, [], "cancelled"),
    ("in_progress", None, [], None),
    ("queued", None, [], None),
])
def test_a_status_gives_the_conventions_finish_reason(status: str, details: Any, output: list[Any],
                                                     finish: str | None) -> None:
    document = {"id": "resp_1", "status": status, "incomplete_details": details, "output": output}
    answer = openai_responses.API.response(document, content=True)
    assert answer.finish_reasons == ((finish,) if finish else ())
    if finish is None:  # nothing said yet, and no reason known: no output message
        assert answer.output_messages is None
    else:
        assert answer.output_messages is not None and answer.output_messages[0]["finish_reason"] == finish


def _sse(response: dict[str, Any]) -> list[tuple[int, bytes]]:
    return [(position * 1000, f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
            for position, event in enumerate(events(response))]


@pytest.mark.parametrize("body", [
    {"model": "gpt-4.1", "input": "A latte", "stream": True},
    {"model": "gpt-4.1", "input": "A latte", "stream": True, "tools": TOOLS[:1], "reasoning": {"effort": "low"}},
    {"model": "gpt-4.1", "input": "A latte", "stream": True, "max_output_tokens": 2},
], ids=["text", "tool call and reasoning", "incomplete"])
def test_a_stream_reads_as_the_response_it_delivers(body: dict[str, Any]) -> None:
    document = _answer(body)
    stream = _sse(document)
    api = api_for("POST", "/v1/responses")
    call = read_exchange(api, "POST", "/v1/responses", status=200, request=body, stream=stream)
    assert call.label == "chat gpt-4.1" and call.first_chunk_ns == 0
    assert call.response == openai_responses.API.response(document, content=True)
    assert assembled(api, (data for _, data in stream)) == document
    unread = read_exchange(api, "POST", "/v1/responses", status=200, request=body, stream=stream, content=False)
    assert unread.response == openai_responses.API.response(document, content=False)


def test_without_content_a_stream_decodes_only_the_events_that_carry_the_response() -> None:
    document = _answer({"model": "gpt-4.1", "input": "A latte", "stream": True, "tools": TOOLS[:1]})
    reading = openai_responses.API.stream(content=False)
    decoded = []
    for event in events(document):
        data = orjson.dumps(event)
        if reading.wants(data):
            decoded.append(event["type"])
            reading.event(orjson.loads(data))
    assert decoded == ["response.created", "response.in_progress", "response.completed"]
    answer = reading.result()
    assert answer.usage.output_tokens == document["usage"]["output_tokens"] and answer.finish_reasons == (
        "tool_call",)
    assert [call.name for call in answer.tool_calls] == ["price_check"]  # from the finished response
    assert not reading.wants(b'{"type":"response.output_text.delta","delta":"\\"type\\":\\"response.completed\\""}')


def test_a_stream_that_ends_early_gives_what_its_deltas_said() -> None:
    document = _answer({"model": "gpt-4.1", "input": "A latte", "stream": True, "tools": TOOLS[:1],
                        "reasoning": {"summary": "auto"}})
    cut = _sse(document)[:-3]  # no output_item.done for the call, no response.completed
    api = openai_responses.API
    call = read_exchange(api, "POST", "/v1/responses", status=200, request={"model": "gpt-4.1"}, stream=cut)
    assert call.response.finish_reasons == () and call.response.id == document["id"]
    assert call.response.output_messages is not None
    parts = call.response.output_messages[0]["parts"]
    assert parts == [{"type": "reasoning", "content": document["output"][0]["summary"][0]["text"]},
                     {"type": "tool_call", "id": document["output"][1]["call_id"], "name": "price_check",
                      "arguments": {"item": "latte"}}]
    kept = assembled(api, (data for _, data in cut))
    assert kept is not None and kept["status"] == "in_progress"
    assert kept["output"][1]["arguments"] == document["output"][1]["arguments"]
    assert api.response(kept, content=True).output_messages == call.response.output_messages


def test_an_error_event_ends_a_stream_as_failed() -> None:
    document = _answer({"model": "gpt-4.1", "input": "A latte", "stream": True})
    stream = [*_sse(document)[:4], (9000, b'event: error\ndata: {"type":"error","code":"server_error",'
                                          b'"message":"boom","sequence_number":4}\n\n')]
    call = read_exchange(openai_responses.API, "POST", "/v1/responses", status=200, request={"model": "m"},
                         stream=stream)
    assert call.response.finish_reasons == ("error",)
    kept = assembled(openai_responses.API, (data for _, data in stream))
    assert kept is not None and kept["status"] == "failed" and kept["error"]["code"] == "server_error"


def test_a_summary_names_the_input_without_its_text() -> None:
    body = {"model": "m", "input": INPUT, "instructions": "secret words", "previous_response_id": "resp_1"}
    line = request_summary(openai_responses.API, "POST", "/v1/responses", body)
    assert line == "POST /v1/responses, 7 input item(s), the last from user, after a previous response"
    assert openai_responses.API.summary({"input": "secret words"}) == "a text input"
    assert openai_responses.API.summary({"input": INPUT[:5]}) == "5 input item(s), the last a function_call_output"
    assert openai_responses.API.summary({"input": [{"role": "secret words here", "content": "x"}]}) == (
        "1 input item(s), the last from ?")
