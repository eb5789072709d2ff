"""Captured content's JSON shape (the switch itself is a setting: `cafe_otel._config.capture`).

Messages are converted from chat-completions bodies to the GenAI convention's parts
shape: `{role, parts: [{type: text|tool_call|tool_call_response, ...}], finish_reason}`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from cafe.privacy import Scrubber

# The switch is a setting, read where settings are read; re-exported for the span code.
from cafe_otel._config.capture import CAPTURE_ENV as CAPTURE_ENV
from cafe_otel._config.capture import CaptureMode as CaptureMode
from cafe_otel._config.capture import capture_mode as capture_mode
from cafe_otel._config.capture import parse_capture as parse_capture


def content_scrubber(environ: Mapping[str, str] | None = None) -> Scrubber:
    """What captured content is scrubbed with before it leaves: the recording's scrubber
    (its default patterns and CAFE_SCRUB_PATTERNS); the live client's secrets are added
    as literals once they are known (`MetadataOnlySpanProcessor.add_secrets`)."""
    return Scrubber.from_environment(environ)


def _maybe_json(text: Any) -> Any:
    # Tool arguments and results are JSON strings in chat-completions; the convention
    # prefers the structured value when there is one.
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _text_parts(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    if isinstance(content, list):  # chat-completions content parts
        parts = []
        for item in content:
            if isinstance(item, dict) and item.get("type") == "text":
                parts.append({"type": "text", "content": item.get("text", "")})
            else:
                parts.append({"type": str((item or {}).get("type", "unknown")) if isinstance(item, dict)
                              else "unknown"})
        return parts
    return [{"type": "text", "content": str(content)}]


def message_parts(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    if message.get("role") == "tool":
        return [{"type": "tool_call_response", "id": message.get("tool_call_id"),
                 "response": _maybe_json(message.get("content"))}]
    parts = _text_parts(message.get("content"))
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        parts.append({"type": "tool_call", "id": call.get("id"), "name": function.get("name"),
                      "arguments": _maybe_json(function.get("arguments"))})
    return parts


def input_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The chat history, system messages included: in chat completions the system prompt
    is a message of the history, which is what `gen_ai.input.messages` holds
    (`gen_ai.system_instructions` is for instructions given apart from it)."""
    return [{"role": m.get("role"), "parts": message_parts(m)} for m in messages]


def system_instructions(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The system messages' parts (kept for callers that hand instructions apart from the
    history; a chat-completions call's stay in its input messages)."""
    parts: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") == "system":
            parts.extend(_text_parts(message.get("content")))
    return parts


# Chat-completions finish reasons onto the convention's output-message enumeration.
_FINISH = {"stop": "stop", "length": "length", "content_filter": "content_filter",
           "tool_calls": "tool_call", "function_call": "tool_call"}


def output_messages(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    found = []
    for choice in response.get("choices") or []:
        message = choice.get("message") or {}
        raw = choice.get("finish_reason")
        found.append({"role": message.get("role", "assistant"), "parts": message_parts(message),
                      "finish_reason": _FINISH.get(str(raw), "error" if raw is None else str(raw))})
    return found


def tool_definitions(tools: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    found = []
    for tool in tools or []:
        function = tool.get("function") or {}
        found.append({"type": tool.get("type", "function"), "name": function.get("name"),
                      "description": function.get("description"),
                      "parameters": function.get("parameters")})
    return found


def to_json(value: Any) -> str:
    """Compact, key-sorted JSON: attribute values must be strings, and stable."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
