"""The Chat Completions reading: a request, a JSON answer and a stream of chunks, as every
consumer reads them."""

from __future__ import annotations

import orjson

from cafe.apis import Operation, api_for, openai_chat, read_exchange

MESSAGES = [
    {"role": "system", "content": "Be kind."},
    {"role": "user", "content": "A latte"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "price_check", "arguments": '{"item":"latte"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": '{"price_eur":1.6}'},
]


def test_messages_convert_to_the_genai_parts_shape_with_the_system_prompt_in_the_history() -> None:
    assert openai_chat.input_messages(MESSAGES) == [
        {"role": "system", "parts": [{"type": "text", "content": "Be kind."}]},
        {"role": "user", "parts": [{"type": "text", "content": "A latte"}]},
        {"role": "assistant", "parts": [
            {"type": "tool_call", "id": "c1", "name": "price_check", "arguments": {"item": "latte"}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": {"price_eur": 1.6}}]},
    ]
    assert openai_chat.API.request_content({"messages": MESSAGES}).system_instructions == []


def test_an_answer_gives_its_output_messages_with_the_conventions_finish_reasons() -> None:
    response = {"choices": [{"message": {"role": "assistant", "content": "1.60"}, "finish_reason": "stop"}]}
    assert openai_chat.API.response(response, content=True).output_messages == [
        {"role": "assistant", "parts": [{"type": "text", "content": "1.60"}], "finish_reason": "stop"}]
    tool_response = {"choices": [{"message": MESSAGES[2], "finish_reason": "tool_calls"}]}
    answer = openai_chat.API.response(tool_response, content=True)
    assert answer.output_messages is not None and answer.output_messages[0]["finish_reason"] == "tool_call"
    assert answer.finish_reasons == ("tool_calls",)
    assert [(call.id, call.name, call.arguments) for call in answer.tool_calls] == [
        ("c1", "price_check", '{"item":"latte"}')]


def test_the_request_gives_every_parameter_the_conventions_name_and_only_those_it_sets() -> None:
    asked = openai_chat.API.request({"model": "gpt-4o", "messages": MESSAGES, "max_completion_tokens": 50,
                                     "max_tokens": 7, "temperature": 0, "stop": "END", "n": 1, "seed": 3,
                                     "response_format": {"type": "json_schema"}}, host="x.openai.azure.com")
    assert (asked.operation, asked.provider, asked.model, asked.max_tokens, asked.temperature) == (
        Operation.CHAT, "azure.ai.openai", "gpt-4o", 50, 0.0)
    assert (asked.stop_sequences, asked.choice_count, asked.seed, asked.output_type) == (("END",), None, 3, "json")
    bare = openai_chat.API.request({"model": "m", "messages": []}, host="127.0.0.1")
    assert (bare.provider, bare.max_tokens, bare.temperature, bare.stream) == ("openai", None, None, False)


def _events(*chunks: dict[str, object]) -> list[tuple[int, bytes]]:
    return [(offset * 1000, b"data: " + orjson.dumps(chunk) + b"\n\n") for offset, chunk in enumerate(chunks)]


def test_a_stream_reads_as_the_document_it_adds_up_to() -> None:
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-4o-2024"}
    stream = [*_events(
        {**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "one "}}]},
        {**head, "choices": [{"index": 0, "delta": {"content": "latte"}}]},
        {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**head, "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 2,
                                          "prompt_tokens_details": {"cached_tokens": 4}}},
    ), (9000, b"data: [DONE]\n\n")]
    api = api_for("POST", "/v1/chat/completions")
    call = read_exchange(api, "POST", "/v1/chat/completions", status=200,
                         request={"model": "gpt-4o", "messages": MESSAGES[:2], "stream": True}, stream=stream)
    assert call.label == "chat gpt-4o" and call.first_chunk_ns == 0
    answer = call.response
    assert (answer.id, answer.model, answer.finish_reasons) == ("chatcmpl-1", "gpt-4o-2024", ("stop",))
    assert (answer.usage.input_tokens, answer.usage.output_tokens, answer.usage.cache_read_input_tokens) == (11, 2, 4)
    assert answer.output_messages == [{"role": "assistant", "parts": [{"type": "text", "content": "one latte"}],
                                       "finish_reason": "stop"}]
    document = api.assembled([orjson.loads(data[6:]) for _, data in stream[:-1]]) if api else None
    assert document is not None and document["choices"][0]["message"]["content"] == "one latte"


def test_without_content_a_stream_decodes_only_the_events_that_carry_metadata() -> None:
    reading = openai_chat.API.stream(content=False)
    first = b'{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"a"}}]}'
    words = b'{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"b"}}]}'
    finish = b'{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}'
    assert reading.wants(first)
    reading.event(orjson.loads(first))
    assert not reading.wants(words)
    assert reading.wants(finish)


def test_a_call_no_reading_knows_is_shown_as_its_method_and_path() -> None:
    call = read_exchange(api_for("GET", "/v1/models"), "GET", "/v1/models", status=200, request=None)
    assert (call.api, call.label, call.request) == (None, "GET /v1/models", None)
