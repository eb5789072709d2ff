"""The values a reading of one model call gives, whatever the API: what was asked, what came
back, and the content in the GenAI conventions' message shape.

Content (messages, instructions, tool definitions) is plain JSON-shaped data in the shape of
the GenAI semantic conventions' JSON schemas (`gen-ai-input-messages.json` and its siblings):
a message is `{"role": ..., "parts": [...]}` (an output message adds `finish_reason`), a part
`{"type": "text", "content": ...}`, `{"type": "tool_call", "id", "name", "arguments"}`,
`{"type": "tool_call_response", "id", "response"}`, `{"type": "reasoning", "content"}`, or
`{"type": <the API's own part type>}` for anything else. So an exporter writes it as it is and
a page shows every API's calls the same way.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Part = dict[str, Any]
"""One message part, in the GenAI conventions' shape."""
Message = dict[str, Any]
"""One message: `{"role": ..., "parts": [Part, ...]}`, plus `finish_reason` on an output one."""


class Operation(enum.StrEnum):
    """`gen_ai.operation.name` of a model call."""

    CHAT = "chat"
    EMBEDDINGS = "embeddings"
    TEXT_COMPLETION = "text_completion"


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens a call used, as its answer reports them (None: not reported). Input tokens are
    every input token, cached ones included, whatever the API counts them as."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    reasoning_output_tokens: int | None = None


NO_USAGE = Usage()


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool the model asked for: its call id, name and arguments as the model wrote them."""

    id: str | None
    name: str | None
    arguments: str | None


@dataclass(frozen=True, slots=True)
class CallRequest:
    """What a request asks for: the API, the model and every parameter the GenAI conventions
    name, when the request sets it. Read without the conversation (no content)."""

    api: str
    """The reading's name: `openai.chat_completions`, `openai.responses`, ..."""
    operation: Operation
    provider: str
    """`gen_ai.provider.name`: the API's maker, or the service by its host (`azure.ai.openai`)."""
    model: str | None = None
    stream: bool = False
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: float | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    stop_sequences: tuple[str, ...] | None = None
    seed: int | None = None
    choice_count: int | None = None
    """How many answers were asked for, when that is not 1."""
    output_type: str | None = None
    """`text`, `json`, `image` or `speech` when the request says so."""
    service_tier: str | None = None
    encoding_formats: tuple[str, ...] | None = None
    dimensions: int | None = None
    conversation_id: str | None = None
    """The API's own conversation this call continues (Responses' `conversation`)."""
    previous_response_id: str | None = None


@dataclass(frozen=True, slots=True)
class RequestContent:
    """The conversation a request carries, in the GenAI conventions' shape."""

    system_instructions: list[Part] = field(default_factory=list)
    """Instructions given apart from the history (Responses' `instructions`, Anthropic's
    `system`); a chat-completions system message stays in the history."""
    input_messages: list[Message] = field(default_factory=list)
    tool_definitions: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class CallResponse:
    """What an answer says: its ids, why it stopped, what it used, the tools it asked for, and
    (when content is read) its output messages."""

    id: str | None = None
    model: str | None = None
    finish_reasons: tuple[str, ...] = ()
    usage: Usage = NO_USAGE
    tool_calls: tuple[ToolCall, ...] = ()
    output_messages: list[Message] | None = None
    system_fingerprint: str | None = None
    service_tier: str | None = None
    embeddings: int | None = None
    """How many vectors an embeddings answer holds."""
    dimension_count: int | None = None
    """The length of an embeddings answer's vectors."""
    error_type: str | None = None
    """The error an answer reports in its body, as the API names it (Anthropic's stream
    `error` event: `overloaded_error`); the HTTP status says the rest."""


NO_RESPONSE = CallResponse()


def text_of(messages: list[Message] | None) -> str | None:
    """The text parts of `messages`, joined: what a page shows as a reply."""
    if not messages:
        return None
    pieces = [str(part.get("content")) for message in messages for part in message.get("parts", ())
              if isinstance(part, Mapping) and part.get("type") == "text" and part.get("content") is not None]
    return "".join(pieces) if pieces else None
