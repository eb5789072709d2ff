"""A live endpoint's reply, checked and reduced to the chat-completions fields the harness uses.

A server can answer anything: HTML from a proxy, JSON of the wrong shape, a tool call with
no name, no usage, text that is not valid Unicode. Each is a `MalformedReply` (a
`ModelCallError`, exit 21) naming the field and what was expected, never quoting the reply:
it may echo the conversation or the key. What passes is a plain, JSON-safe body whose shape
a recording, a replay and the loop can rely on.
"""

from __future__ import annotations

from typing import Any

from cafe.counter.clients.base import Message, Response
from cafe.errors import ModelCallError
from cafe.jsondata import describe as _kind

USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")
MAX_TOKENS = 2**31 - 1


class MalformedReply(ModelCallError):
    def __init__(self, endpoint: str | None, field: str, expected: str, found: Any) -> None:
        self.field = field
        super().__init__(f"model endpoint {endpoint} answered a malformed reply: {field}: expected {expected}, "
                         f"found {_kind(found)}")


def _text(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 form, no place in a recording
        return False
    return True


class _Checker:
    def __init__(self, endpoint: str | None) -> None:
        self.endpoint = endpoint

    def fail(self, field: str, expected: str, found: Any) -> MalformedReply:
        return MalformedReply(self.endpoint, field, expected, found)

    def text(self, value: Any, field: str, *, optional: bool = False, non_empty: bool = False) -> str | None:
        if value is None and optional:
            return None
        if not _text(value) or (non_empty and not value):
            what = "a non-empty string" if non_empty else "a string"
            raise self.fail(field, what + (" or null" if optional else "") + " of valid Unicode", value)
        return str(value)

    def count(self, value: Any, field: str) -> int:
        if value is None:
            return 0
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKENS:
            raise self.fail(field, f"a whole number of tokens from 0 to {MAX_TOKENS}", value)
        return value

    def tool_call(self, call: Any, field: str) -> dict[str, Any]:
        if not isinstance(call, dict):
            raise self.fail(field, "an object", call)
        function = call.get("function")
        if not isinstance(function, dict):
            raise self.fail(f"{field}.function", "an object", function)
        call_id = call.get("id")
        if isinstance(call_id, int) and not isinstance(call_id, bool):
            call_id = str(call_id)  # ids are matched as strings by the loop and the replay
        return {
            "id": self.text(call_id, f"{field}.id", non_empty=True),
            "type": self.text(call.get("type", "function"), f"{field}.type"),
            "function": {
                "name": self.text(function.get("name"), f"{field}.function.name", non_empty=True),
                # Invalid JSON arguments are the model's to get wrong: the loop answers them.
                "arguments": self.text(function.get("arguments", ""), f"{field}.function.arguments"),
            },
        }

    def choice(self, choice: Any, field: str) -> dict[str, Any]:
        if not isinstance(choice, dict):
            raise self.fail(field, "an object", choice)
        raw = choice.get("message")
        if not isinstance(raw, dict):
            raise self.fail(f"{field}.message", "an object", raw)
        message: Message = {
            "role": self.text(raw.get("role", "assistant"), f"{field}.message.role"),
            "content": self.text(raw.get("content"), f"{field}.message.content", optional=True),
        }
        calls = raw.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise self.fail(f"{field}.message.tool_calls", "an array or null", calls)
        if calls:
            message["tool_calls"] = [self.tool_call(call, f"{field}.message.tool_calls[{n}]")
                                     for n, call in enumerate(calls)]
        index = choice.get("index", 0)
        if isinstance(index, bool) or not isinstance(index, int):
            raise self.fail(f"{field}.index", "a whole number", index)
        return {"index": index, "message": message,
                "finish_reason": self.text(choice.get("finish_reason"), f"{field}.finish_reason", optional=True)}


def reduce_reply(body: Any, endpoint: str | None) -> Response:
    """The reply checked field by field, as the chat-completions body the harness keeps."""
    check = _Checker(endpoint)
    if not isinstance(body, dict):
        raise check.fail("$", "a JSON object (a chat completion)", body)
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise check.fail("choices", "a non-empty array", choices)
    usage = body.get("usage")
    if not isinstance(usage, dict):
        raise check.fail("usage", "an object with the token counts", usage)
    return {
        "id": check.text(body.get("id"), "id", optional=True),
        "model": check.text(body.get("model"), "model", optional=True),
        "choices": [check.choice(choice, f"choices[{n}]") for n, choice in enumerate(choices)],
        "usage": {key: check.count(usage.get(key), f"usage.{key}") for key in USAGE_KEYS},
    }
