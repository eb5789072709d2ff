"""Figure 9's Responses and Anthropic calls say what its chat call says: bench/apis.py's
request and answers, whole and streamed, read by cafe.apis (the readings telemetry uses) as
the same model, tools, tool calls and usage, so that each row prices the same work."""

from __future__ import annotations

import json

import pytest

from bench import apis
from cafe.apis import api_for, read_exchange

MODEL = "gpt-4o-mini-2024-07-18"
MESSAGES = [
    {"role": "system", "content": "You are the counter assistant."},
    {"role": "user", "content": "A latte for table 4, please."},
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "call_1", "type": "function",
                     "function": {"name": "price_check", "arguments": "{\"item\": \"latte\"}"}},
                    {"id": "call_0", "type": "function",
                     "function": {"name": "price_check", "arguments": "{\"item\": \"milk\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"price_eur\": 1.6}"},
    {"role": "tool", "tool_call_id": "call_0", "content": "{\"price_eur\": 0.2}"},
    {"role": "assistant", "content": "A latte is 1.60."},
    {"role": "user", "content": "And two croissants."},
]
TOOLS = [{"type": "function", "function": {"name": "price_check", "description": "Price of one item.",
                                           "parameters": {"type": "object",
                                                          "properties": {"item": {"type": "string"}},
                                                          "required": ["item"]}}}]
CHAT = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": MODEL,
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": None, "tool_calls": [
                         {"id": "call_2", "type": "function",
                          "function": {"name": "price_check", "arguments": "{\"item\": \"croissant\"}"}},
                         {"id": "call_3", "type": "function",
                          "function": {"name": "price_check", "arguments": "{\"item\": \"tea\"}"}}]}}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 24, "total_tokens": 144}}
PATHS = {"responses": "/v1/responses", "anthropic": "/v1/messages"}


def _stream_pieces(events: list[str]) -> list[tuple[int, bytes]]:
    return [(number, event.encode()) for number, event in enumerate(events)]


@pytest.mark.parametrize("api", ["responses", "anthropic"])
@pytest.mark.parametrize("streamed", [False, True])
def test_the_call_in_each_api_reads_as_the_chat_call(api: str, streamed: bool):
    call = apis.call_of(api, MESSAGES, TOOLS, CHAT, MODEL)
    reading = api_for("POST", PATHS[api])
    assert reading is not None
    request = {**call["request"], "model": call["model"], **({"stream": True} if streamed else {})}
    read = read_exchange(reading, "POST", PATHS[api], status=200, request=json.loads(json.dumps(request)),
                         response=None if streamed else call["body"],
                         stream=_stream_pieces(call["events"]) if streamed else None)
    assert read.request is not None and read.content is not None
    assert (read.request.provider, read.request.model) == (
        ("anthropic", apis.ANTHROPIC_MODEL) if api == "anthropic" else ("openai", MODEL))
    assert read.content.system_instructions  # the system prompt, as instructions or `system`
    assert [(tool.name, json.loads(tool.arguments or "null")) for tool in read.response.tool_calls] == [
        ("price_check", {"item": "croissant"}), ("price_check", {"item": "tea"})]
    assert (read.response.usage.input_tokens, read.response.usage.output_tokens) == (120, 24)
    assert read.response.id == call["body"]["id"]
    floor = call["floor"]["response"]
    assert floor["gen_ai.usage.input_tokens"] == 120 and floor["gen_ai.response.id"] == call["body"]["id"]


def test_the_conversation_keeps_its_turns_and_tool_results():
    responses = apis.responses_request(MESSAGES, TOOLS)
    assert responses["instructions"] == MESSAGES[0]["content"]
    assert [item.get("type", item.get("role")) for item in responses["input"]] == [
        "user", "function_call", "function_call", "function_call_output", "function_call_output", "assistant",
        "user"]
    anthropic = apis.anthropic_request(MESSAGES, TOOLS)
    # Two tool results in a row are one user turn, as the API requires.
    assert [turn["role"] for turn in anthropic["messages"]] == ["user", "assistant", "user", "assistant", "user"]
    assert [block["tool_use_id"] for block in anthropic["messages"][2]["content"]] == ["call_1", "call_0"]
    assert [block["input"] for block in anthropic["messages"][1]["content"]] == [{"item": "latte"}, {"item": "milk"}]
    assert anthropic["tools"][0]["input_schema"] == TOOLS[0]["function"]["parameters"]


def test_an_api_it_does_not_know_is_named():
    with pytest.raises(ValueError, match="api 'embeddings': one of chat, responses, anthropic"):
        apis.call_of("embeddings", MESSAGES, TOOLS, CHAT, MODEL)
