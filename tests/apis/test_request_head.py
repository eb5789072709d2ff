"""A request's parameters without its conversation: each API's `request` reads only the keys
it declares (`request_keys`), and `cafe.apis.request_head` decodes those alone from the bytes,
so that telemetry reads the same parameters as from the whole body at a cost that does not
follow the conversation."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from cafe.apis import APIS, Api, request_head

CONVERSATION = [
    {"role": "system", "content": "You are the counter assistant. {\"model\": \"in-a-string\"} \\u00e9 \u20ac"},
    {"role": "user", "content": [{"type": "text", "text": "a latte \\\" ] } ["}]},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "price_check", "arguments": "{\"item\": \"latte\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": [[[[{"deep": [1.5e300, -0.0, True, None]}]]]]},
]
# Every parameter the four readings know, with a value each would read, beside the
# conversation in each API's words and a nested `model` that is not the request's.
WIDE: dict[str, Any] = {
    "messages": CONVERSATION, "input": CONVERSATION, "system": "Be brief.", "instructions": "Be brief.",
    "tools": [{"type": "function", "function": {"name": "price_check", "parameters": {"type": "object"}}}],
    "metadata": {"model": "not-the-request-model"},
    "model": "gpt-4o-mini", "stream": True, "temperature": 0.2, "top_p": 0.9, "top_k": 5, "n": 2, "seed": 7,
    "max_tokens": 40, "max_completion_tokens": 50, "max_output_tokens": 60, "frequency_penalty": 0.1,
    "presence_penalty": 0.2, "stop": ["x"], "stop_sequences": ["y"], "service_tier": "flex",
    "modalities": ["text", "audio"], "response_format": {"type": "json_schema", "json_schema": {"name": "o"}},
    "text": {"format": {"type": "json_schema", "name": "o"}}, "conversation": {"id": "conv_1"},
    "previous_response_id": "resp_0", "encoding_format": "base64", "dimensions": 256,
    "output_config": {"format": {"type": "json_schema", "schema": {}}},
}


class _KeysRead(dict[str, Any]):
    """A body that notes every top-level key read from it."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return super().__contains__(key)


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
def test_each_reading_reads_only_the_keys_it_declares(api: Api):
    body = _KeysRead(WIDE)
    api.request(body, host="api.openai.com")
    assert body.read, "the reading read nothing: the test would prove nothing"
    assert body.read <= api.request_keys, f"{api.name} reads {sorted(body.read - api.request_keys)} undeclared"


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
@pytest.mark.parametrize("body", [WIDE, {"model": "m", "messages": []}, {"messages": CONVERSATION}, {},
                                  {"model": None, "temperature": "warm", "stream": "yes", "n": 10**30}],
                         ids=["wide", "bare", "no-parameters", "empty", "odd-values"])
def test_the_head_reads_as_the_whole_body(api: Api, body: dict[str, Any]):
    data = _dumps(body)
    head = request_head(data, api.request_keys)
    assert head is not None and set(head) <= api.request_keys
    assert api.request(head, host="api.openai.com") == api.request(orjson.loads(data), host="api.openai.com")


def _dumps(body: dict[str, Any]) -> bytes:
    import json

    return json.dumps(body).encode()  # the standard library writes a big integer as it is


@pytest.mark.parametrize("data", [b"", b"[]", b'"a request"', b"{", b'{"model": "m"} trailing', b"\xff{}",
                                  b'{"model": "m", "messages": [}'])
def test_what_is_not_one_json_object_has_no_head(data: bytes):
    assert request_head(data, APIS[0].request_keys) is None


def test_the_head_holds_the_parameters_and_none_of_the_conversation():
    head = request_head(_dumps(WIDE), frozenset({"model", "temperature", "stream"}))
    assert head == {"model": "gpt-4o-mini", "temperature": 0.2, "stream": True}
    # A key asked for that the body does not hold is left out, not read as null.
    assert request_head(b'{"model": null}', frozenset({"model", "seed"})) == {"model": None}
