"""Anthropic Messages (`POST .../v1/messages`): the request, a JSON message, and a stream of
`message_start` / `content_block_*` / `message_delta` / `message_stop` events.

`system` is given apart from the history, so it is the call's system instructions; the
history's `tool_use` and `tool_result` blocks are tool calls and their responses, and
`thinking` blocks are reasoning parts. Counting the tokens of a request
(`/v1/messages/count_tokens`) and message batches are other paths, not read here.

Usage follows the 1.41.1 Anthropic span (`span.anthropic.inference.client`): Anthropic's
`input_tokens` leaves out the tokens read from or written to the prompt cache, so the call's
input tokens are `input_tokens + cache_read_input_tokens + cache_creation_input_tokens`,
and the two cache counts are given as they are. A stream's `message_delta` usage is
cumulative: it replaces what `message_start` said, field by field.

`thinking` and `service_tier` in a request set no attribute: 1.41.1 defines none for them
(`openai.*` ones are not Anthropic's)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from cafe.apis._model import (
    CallRequest,
    CallResponse,
    Message,
    Operation,
    Part,
    RequestContent,
    ToolCall,
    Usage,
)
from cafe.apis._values import (
    integer,
    items,
    mapping,
    maybe_json,
    number,
    other_part,
    provider_for,
    strings,
    text,
)

NAME = "anthropic.messages"
_PATH_SUFFIX = "/v1/messages"

# Anthropic's stop reasons onto the conventions' output-message enumeration; a stop reason
# not listed here ends the turn too ("stop"), and a message that never said why it stopped
# (a stream cut short, an `error` event) is "error".
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "max_tokens": "length",
           "model_context_window_exceeded": "length", "tool_use": "tool_call", "refusal": "content_filter"}
# The events that carry metadata: the head and the input usage (`message_start`), each
# block's kind and a tool's name (`content_block_start`), the stop reason and the output
# usage (`message_delta`), a failure (`error`). A `"type"` key's closing quote is never
# inside a JSON string (a quote there is escaped), so a text delta cannot fake one.
_WANTED_IN_EVENT = re.compile(rb'"type"\s*:\s*"(?:message_start|content_block_start|message_delta|error)"')


def _source_part(source: Any, modality: str) -> Part:
    """An image's or a document's `source` as a part: inline data as a blob, a URL as a uri,
    an uploaded file by its id, a plain-text document as its text."""
    source = mapping(source)
    kind = source.get("type")
    mime = text(source.get("media_type"))
    if kind == "base64":
        return {"type": "blob", "modality": modality, "mime_type": mime, "content": str(source.get("data", ""))}
    if kind == "url":
        return {"type": "uri", "modality": modality, "uri": str(source.get("url", ""))}
    if kind == "file" and isinstance(source.get("file_id"), str):
        return {"type": "file", "modality": modality, "file_id": source["file_id"]}
    if kind == "text":
        return {"type": "text", "content": str(source.get("data", ""))}
    return other_part(modality)


def _tool_result(content: Any) -> Any:
    """A `tool_result`'s content as the response the conventions carry: its text (JSON text
    as the value it holds), or its blocks as parts when they are not all text."""
    if not isinstance(content, list):
        return maybe_json(content)
    parts = [block_part(block) for block in content]
    if parts and all(part.get("type") == "text" for part in parts):
        return maybe_json("".join(str(part["content"]) for part in parts))
    return parts


def block_part(block: Any) -> Part:
    """One content block (of a message, of `system`, or of an answer) as a message part."""
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text":
        return {"type": "text", "content": str(block.get("text", ""))}
    if kind == "thinking":
        return {"type": "reasoning", "content": str(block.get("thinking", ""))}
    if kind == "tool_use":
        return {"type": "tool_call", "id": text(block.get("id")), "name": block.get("name"),
                "arguments": block.get("input")}
    if kind == "tool_result":
        return {"type": "tool_call_response", "id": text(block.get("tool_use_id")),
                "response": _tool_result(block.get("content"))}
    if kind == "server_tool_use" and isinstance(block.get("name"), str):
        return {"type": "server_tool_call", "id": text(block.get("id")), "name": block["name"],
                "server_tool_call": {"type": block["name"], "arguments": block.get("input")}}
    if isinstance(kind, str) and kind.endswith("_tool_result"):  # a server tool's result
        return {"type": "server_tool_call_response", "id": text(block.get("tool_use_id")),
                "server_tool_call_response": {"type": kind, "content": block.get("content")}}
    if kind == "image":
        return _source_part(block.get("source"), "image")
    if kind == "document":
        return _source_part(block.get("source"), "document")
    return other_part(kind)


def _parts(content: Any) -> list[Part]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    if isinstance(content, list):
        return [block_part(block) for block in content]
    return []


def input_messages(messages: Iterable[Mapping[str, Any]]) -> list[Message]:
    """The history as the conventions' input messages, each with its role as sent."""
    return [{"role": message.get("role"), "parts": _parts(message.get("content"))} for message in messages]


def system_instructions(system: Any) -> list[Part]:
    """`system` (a string, or text blocks) as the conventions' system instructions."""
    return _parts(system)


def tool_definitions(tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A client tool (`name`, `description`, `input_schema`) as a function; a server tool
    (`web_search_20250305`, `bash_...`) by its type and name."""
    found = []
    for tool in tools:
        kind = tool.get("type")
        if kind is None or kind == "custom":
            found.append({"type": "function", "name": tool.get("name"), "description": tool.get("description"),
                          "parameters": tool.get("input_schema")})
        else:
            found.append({"type": kind, "name": tool.get("name")})
    return found


def finish_reason(raw: Any) -> str:
    """An Anthropic stop reason as the conventions' output message spells it."""
    if not isinstance(raw, str):
        return "error"
    return _FINISH.get(raw, "stop")


def _usage(usage: Mapping[str, Any]) -> Usage:
    fresh = integer(usage.get("input_tokens"))
    read = integer(usage.get("cache_read_input_tokens"))
    created = integer(usage.get("cache_creation_input_tokens"))
    details = mapping(usage.get("output_tokens_details"))
    return Usage(input_tokens=None if fresh is None else fresh + (read or 0) + (created or 0),
                 output_tokens=integer(usage.get("output_tokens")),
                 cache_read_input_tokens=read, cache_creation_input_tokens=created,
                 reasoning_output_tokens=integer(details.get("thinking_tokens")))


def _arguments(block: Mapping[str, Any]) -> str | None:
    """A `tool_use` block's input as JSON text: the text the model wrote when the block was
    streamed, else its input object written compactly; None when the input is not known."""
    if "partial_json" in block:
        return str(block["partial_json"])
    if "input" not in block:
        return None
    return orjson.dumps(block["input"]).decode()


def read_message(document: Mapping[str, Any], *, content: bool, error_type: str | None = None) -> CallResponse:
    """A message (a JSON answer, or a stream put together) as what the call answered."""
    if document.get("type") == "error":
        error = mapping(document.get("error"))
        return CallResponse(error_type=text(error.get("type")) or "error")
    blocks = items(document.get("content"))
    calls = tuple(ToolCall(text(block.get("id")), text(block.get("name")), _arguments(block))
                  for block in blocks if block.get("type") == "tool_use")
    stop = text(document.get("stop_reason"))
    output = None
    if content:
        parts = []
        for block in blocks:
            if block.get("type") == "tool_use" and "partial_json" in block:
                block = {**block, "input": maybe_json(block["partial_json"] or "{}")}
            parts.append(block_part(block))
        reason = "error" if error_type is not None else finish_reason(stop)
        output = [{"role": text(document.get("role")) or "assistant", "parts": parts, "finish_reason": reason}]
    return CallResponse(id=text(document.get("id")), model=text(document.get("model")),
                        finish_reasons=(stop,) if stop else (), usage=_usage(mapping(document.get("usage"))),
                        tool_calls=calls, output_messages=output, error_type=error_type)


class _Assembly:
    """A stream's events put together as the message they add up to. Without `deltas`, the
    blocks' text, thinking and tool input are not put together (only their kinds, ids and
    names): a tool's input is then unknown, not `{}`.

    A streamed `tool_use` block keeps the JSON text of its input, as the model wrote it, in
    `partial_json` until `document()` turns it into the `input` object."""

    __slots__ = ("_deltas", "blocks", "error", "message", "usage")

    def __init__(self, *, deltas: bool = True) -> None:
        self._deltas = deltas
        self.message: dict[str, Any] | None = None
        self.usage: dict[str, Any] = {}
        self.blocks: dict[int, dict[str, Any]] = {}
        self.error: Mapping[str, Any] | None = None

    def event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "content_block_delta":
            if self._deltas:
                self._delta(event)
        elif kind == "content_block_start":
            index = integer(event.get("index"))
            block = event.get("content_block")
            if index is not None and isinstance(block, dict):
                started = dict(block)
                if started.get("type") in ("tool_use", "server_tool_use"):
                    started.pop("input", None)
                    if self._deltas:
                        started["partial_json"] = ""
                self.blocks[index] = started
        elif kind == "message_start":
            message = mapping(event.get("message"))
            self.message = {key: value for key, value in message.items() if key not in ("content", "usage")}
            self.usage.update((key, value) for key, value in mapping(message.get("usage")).items() if value is not None)
            for index, block in enumerate(items(message.get("content"))):  # never seen: content starts empty
                self.blocks.setdefault(index, dict(block))
        elif kind == "message_delta":
            if self.message is None:
                self.message = {}
            for key, value in mapping(event.get("delta")).items():
                self.message[key] = value
            self.usage.update((key, value) for key, value in mapping(event.get("usage")).items() if value is not None)
        elif kind == "error":
            self.error = mapping(event.get("error"))

    def _delta(self, event: Mapping[str, Any]) -> None:
        index = integer(event.get("index"))
        block = self.blocks.get(index) if index is not None else None
        delta = mapping(event.get("delta"))
        if block is None:
            return
        kind = delta.get("type")
        if kind == "text_delta" and isinstance(delta.get("text"), str):
            block["text"] = str(block.get("text") or "") + delta["text"]
        elif kind == "input_json_delta" and isinstance(delta.get("partial_json"), str):
            block["partial_json"] = str(block.get("partial_json") or "") + delta["partial_json"]
        elif kind == "thinking_delta" and isinstance(delta.get("thinking"), str):
            block["thinking"] = str(block.get("thinking") or "") + delta["thinking"]
        elif kind == "signature_delta" and isinstance(delta.get("signature"), str):
            block["signature"] = delta["signature"]
        elif kind == "citations_delta" and isinstance(delta.get("citation"), dict):
            block.setdefault("citations", []).append(delta["citation"])

    def error_type(self) -> str | None:
        if self.error is None:
            return None
        return text(self.error.get("type")) or "error"

    def document(self, *, inputs: bool = False) -> dict[str, Any] | None:
        """The message so far, or None before `message_start`. With `inputs`, a streamed
        tool's JSON text becomes its `input` object (the text itself when it is cut short)."""
        if self.message is None:
            return None
        blocks = [self.blocks[index] for index in sorted(self.blocks)]
        if inputs:
            blocks = [_with_input(block) for block in blocks]
        return {**self.message, "content": blocks, "usage": dict(self.usage)}


def _with_input(block: dict[str, Any]) -> dict[str, Any]:
    if "partial_json" not in block:
        return block
    written = block["partial_json"]
    done = {key: value for key, value in block.items() if key != "partial_json"}
    try:
        done["input"] = orjson.loads(written) if written else {}
    except orjson.JSONDecodeError:
        done["input"] = written
    return done


class _Stream:
    """A Messages stream. With content off, an event is decoded only when it carries
    metadata (`_WANTED_IN_EVENT`): the text, thinking and tool-input deltas in between are
    timed, never decoded."""

    __slots__ = ("_assembly", "_content")

    def __init__(self, *, content: bool) -> None:
        self._content = content
        self._assembly = _Assembly(deltas=content)

    def wants(self, data: bytes) -> bool:
        return self._content or _WANTED_IN_EVENT.search(data) is not None

    def event(self, event: Mapping[str, Any]) -> None:
        self._assembly.event(event)

    def result(self) -> CallResponse:
        assembly = self._assembly
        error_type = assembly.error_type()
        document = assembly.document()
        if document is None:
            return CallResponse(error_type=error_type)
        return read_message(document, content=self._content, error_type=error_type)


class Messages:
    """The Anthropic Messages reading (`cafe.apis.Api`)."""

    name = NAME
    operation = Operation.CHAT
    request_keys = frozenset({
        "max_tokens", "model", "output_config", "output_format", "stop_sequences", "stream", "temperature", "top_k",
        "top_p"
    })

    def handles(self, method: str, path: str) -> bool:
        return method == "POST" and path.endswith(_PATH_SUFFIX)

    def request(self, body: Mapping[str, Any], *, host: str | None) -> CallRequest:
        output_format = mapping(mapping(body.get("output_config")).get("format")) or mapping(body.get("output_format"))
        return CallRequest(
            api=NAME, operation=Operation.CHAT, provider=provider_for(host, "anthropic"),
            model=text(body.get("model")), stream=body.get("stream") is True,
            max_tokens=integer(body.get("max_tokens")), temperature=number(body.get("temperature")),
            top_p=number(body.get("top_p")), top_k=number(body.get("top_k")),
            stop_sequences=strings(body.get("stop_sequences")),
            output_type="json" if output_format.get("type") == "json_schema" else None)

    def request_content(self, body: Mapping[str, Any]) -> RequestContent:
        return RequestContent(system_instructions=system_instructions(body.get("system")),
                              input_messages=input_messages(items(body.get("messages"))),
                              tool_definitions=tool_definitions(items(body.get("tools"))))

    def response(self, document: Mapping[str, Any], *, content: bool) -> CallResponse:
        return read_message(document, content=content)

    def stream(self, *, content: bool) -> _Stream:
        return _Stream(content=content)

    def assembled(self, events: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
        """The message the events add up to; a stream that failed (an `error` event) adds up
        to the error body the API answers an unstreamed call with."""
        assembly = _Assembly()
        for event in events:
            assembly.event(event)
        if assembly.error is not None:
            return {"type": "error", "error": dict(assembly.error)}
        return assembly.document(inputs=True)

    def summary(self, body: Mapping[str, Any]) -> str:
        messages = items(body.get("messages"))
        if not messages:
            return "no messages"
        role = messages[-1].get("role")
        shown = role if isinstance(role, str) and role.isidentifier() and len(role) <= 20 else "?"
        return f"{len(messages)} message(s), the last from {shown}"


API = Messages()
