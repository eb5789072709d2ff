"""A canonical rendering of a shift's conversation: nothing but the messages, in order,
so that two transcripts differ only when the conversations do."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Sequence
from typing import Any, Protocol


class _HasMessages(Protocol):
    messages: list[dict[str, Any]]


def _line(message: dict[str, Any]) -> list[str]:
    role = message.get("role", "?")
    if role == "tool":
        return [f"tool[{message.get('tool_call_id')}]: {message.get('content')}"]
    lines = []
    if message.get("content") is not None:
        lines.append(f"{role}: {message['content']}")
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments: Any = function.get("arguments")
        # Invalid JSON arguments are part of the conversation as sent, so they stay raw.
        with contextlib.suppress(TypeError, ValueError):
            arguments = json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
        lines.append(f"{role} -> {function.get('name')}({arguments}) [{call.get('id')}]")
    return lines or [f"{role}:"]


def transcript(run: _HasMessages | Sequence[dict[str, Any]]) -> str:
    messages = run if isinstance(run, Sequence) else run.messages
    return "\n".join(line for message in messages for line in _line(message))


def transcript_digest(run: _HasMessages | Sequence[dict[str, Any]]) -> str:
    # surrogatepass: a lone surrogate (from a "\ud800" escape) must not crash the digest.
    return hashlib.sha256(transcript(run).encode("utf-8", "surrogatepass")).hexdigest()
