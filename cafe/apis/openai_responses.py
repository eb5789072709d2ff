"""OpenAI Responses (`POST .../responses`): the request, a JSON answer (a `response` object),
and a stream of `response.*` server-sent events.

Spoken by OpenAI and Azure OpenAI, and used by default by the OpenAI Agents SDK. Only the
call that makes a response is read; `GET /responses/{id}`, `/cancel` and `/input_items` are
calls no reading knows.

The request's `instructions` are system instructions, apart from the history. Its `input` (a
string, or a list of items) is the history: a message item is a message of its role; the
items the model produced (a `function_call`, a `reasoning` item, a built-in tool's call, an
assistant message) that follow one another are the parts of one assistant message, as the
answer that produced them gave them; a tool's output (`function_call_output`, and every
other `*_output` item) is a `tool` message of its own.

An answer's output items are the parts of one assistant output message. A response has one
`status`, not a reason per choice, so its finish reason is read from that (and given alike
as `gen_ai.response.finish_reasons` and the output message's `finish_reason`):

- `completed`: `tool_call` when the output asks for a tool the caller runs (a
  `function_call` or `custom_tool_call`), otherwise `stop`;
- `incomplete`: from `incomplete_details.reason`: `max_output_tokens` is `length`,
  `content_filter` is `content_filter`, another reason is given as the API spells it, and
  none given is `length`;
- `failed` (or an `error` event in a stream): `error`; `cancelled`: `cancelled`;
- `queued` or `in_progress` (a background response, or a stream that ended early): none is
  known, so none is given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from cafe.apis._model import CallRequest, CallResponse, Message, Operation, Part, RequestContent, ToolCall, Usage
from cafe.apis._values import integer, items, mapping, maybe_json, number, other_part, output_type, provider_for, text

NAME = "openai.responses"
_PATH_SUFFIX = "/responses"

# The events that carry a whole `response` object, and those of them that end a stream.
_SNAPSHOTS = frozenset({"response.created", "response.in_progress", "response.queued"})
_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
# An event that carries the response object (its head, its end: id, model, status, usage)
# or reports an error. A key's closing quote is never inside a JSON string (a quote there is
# escaped), so a delta's text cannot fake one; a false match only costs a decode.
_WANTED_IN_EVENT = re.compile(
    rb'"type"\s*:\s*"(?:response\.(?:created|in_progress|queued|completed|incomplete|failed)|error)"')
# The items of built-in tools the caller runs (the model asks, the caller answers with the
# item's `*_output`): tool calls like a function's. Any other `*_call` is run by the service.
_CALLER_RUN = frozenset({"computer_call", "local_shell_call", "shell_call", "apply_patch_call"})
_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


def _media_part(url: Any, modality: str) -> Part:
    """A data URL's bytes as a blob, any other URL as a uri."""
    if isinstance(url, str) and url.startswith("data:") and "," in url:
        head, _, data = url.partition(",")
        mime = head[5:].split(";", 1)[0] or None
        return {"type": "blob", "modality": modality, "mime_type": mime, "content": data}
    return {"type": "uri", "modality": modality, "uri": url if isinstance(url, str) else ""}


def _content_part(part: Mapping[str, Any]) -> Part:
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
        return {"type": "text", "content": str(part.get("text", ""))}
    if kind == "refusal":
        return {"type": "text", "content": str(part.get("refusal", ""))}
    if kind == "input_image":
        if isinstance(part.get("file_id"), str):
            return {"type": "file", "modality": "image", "file_id": part["file_id"]}
        return _media_part(part.get("image_url"), "image")
    if kind == "input_file":
        if isinstance(part.get("file_id"), str):
            return {"type": "file", "modality": "document", "file_id": part["file_id"]}
        if isinstance(part.get("file_url"), str):
            return {"type": "uri", "modality": "document", "uri": part["file_url"]}
        data = part.get("file_data")
        if isinstance(data, str) and data.startswith("data:"):
            return _media_part(data, "document")
        if isinstance(data, str):
            return {"type": "blob", "modality": "document", "mime_type": None, "content": data}
    if kind == "input_audio":
        audio = mapping(part.get("input_audio"))
        return {"type": "blob", "modality": "audio", "mime_type": f"audio/{audio.get('format', 'wav')}",
                "content": str(audio.get("data", ""))}
    return other_part(kind)


def _content_parts(content: Any) -> list[Part]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    return [_content_part(part) for part in items(content)]


def _reasoning_part(item: Mapping[str, Any]) -> Part:
    """A reasoning item's text (its reasoning text, else its summaries): empty when only its
    encrypted content was returned."""
    texts = [str(part.get("text", "")) for part in items(item.get("content"))]
    if not texts:
        texts = [str(part.get("text", "")) for part in items(item.get("summary"))]
    return {"type": "reasoning", "content": "\n\n".join(texts)}


def item_parts(item: Mapping[str, Any]) -> list[Part]:
    """The parts of one item the model produced: a message's text, a tool call, reasoning,
    a built-in tool's call (run by the service), or a part of the item's own type."""
    kind = item.get("type")
    if kind == "message" or (kind is None and "role" in item):
        return _content_parts(item.get("content"))
    if kind == "function_call":
        return [{"type": "tool_call", "id": item.get("call_id"), "name": str(item.get("name", "")),
                 "arguments": maybe_json(item.get("arguments"))}]
    if kind == "custom_tool_call":
        return [{"type": "tool_call", "id": item.get("call_id"), "name": str(item.get("name", "")),
                 "arguments": item.get("input")}]
    if kind == "reasoning":
        return [_reasoning_part(item)]
    if kind in _CALLER_RUN:
        assert isinstance(kind, str)
        return [{"type": "tool_call", "id": item.get("call_id"), "name": kind.removesuffix("_call"),
                 "arguments": item.get("action", item.get("operation"))}]
    if isinstance(kind, str) and kind.endswith("_call"):
        return [{"type": "server_tool_call", "id": item.get("id"), "name": kind.removesuffix("_call"),
                 "server_tool_call": {"type": kind}}]
    return [other_part(kind)]


def _is_tool_output(item: Mapping[str, Any]) -> bool:
    kind = item.get("type")
    return isinstance(kind, str) and kind.endswith("_output")


def _tool_output(item: Mapping[str, Any]) -> Part:
    """A tool's output as the conventions' tool call response: text content parts as their
    text, JSON text as its value."""
    output = item.get("output")
    if isinstance(output, list):
        texts = [part for part in items(output) if part.get("type") in ("input_text", "output_text")]
        if texts and len(texts) == len(output):
            output = "".join(str(part.get("text", "")) for part in texts)
    call_id = item.get("call_id")
    return {"type": "tool_call_response", "id": call_id if isinstance(call_id, str) else item.get("id"),
            "response": maybe_json(output)}


def input_messages(value: Any) -> list[Message]:
    """The request's `input` as the conventions' input messages (see the module's docstring)."""
    if isinstance(value, str):
        return [{"role": "user", "parts": [{"type": "text", "content": value}]}]
    messages: list[Message] = []
    answer: Message | None = None  # the assistant message the model's items go into
    for item in items(value):
        role = item.get("role")
        if item.get("type") in ("message", None) and isinstance(role, str) and role != "assistant":
            answer = None
            messages.append({"role": role, "parts": _content_parts(item.get("content"))})
        elif _is_tool_output(item):
            answer = None
            messages.append({"role": "tool", "parts": [_tool_output(item)]})
        else:
            if answer is None:
                answer = {"role": "assistant", "parts": []}
                messages.append(answer)
            answer["parts"].extend(item_parts(item))
    return messages


def system_instructions(instructions: Any) -> list[Part]:
    """`instructions`: a string, or (as a response echoes a prompt's) a list of input items."""
    if isinstance(instructions, str):
        return [{"type": "text", "content": instructions}] if instructions else []
    return [part for message in input_messages(instructions) for part in message["parts"]]


def tool_definitions(tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Function tools with their description and parameters; a built-in tool by its type
    (an MCP server by its label), never its settings (an MCP server's headers hold a key)."""
    found = []
    for tool in tools:
        kind = tool.get("type")
        if kind == "function":
            found.append({"type": "function", "name": tool.get("name"), "description": tool.get("description"),
                          "parameters": tool.get("parameters")})
        else:
            name = tool.get("name") if kind == "custom" else tool.get("server_label") if kind == "mcp" else kind
            found.append({"type": kind if isinstance(kind, str) else "unknown",
                          "name": name if isinstance(name, str) else str(kind)})
    return found


def finish_reason(status: Any, incomplete_reason: Any, output: Iterable[Mapping[str, Any]]) -> str | None:
    """A response's finish reason, from its status (see the module's docstring)."""
    if status == "completed":
        calls = any(item.get("type") in ("function_call", "custom_tool_call") for item in output)
        return "tool_call" if calls else "stop"
    if status == "incomplete":
        if not isinstance(incomplete_reason, str):
            return "length"
        return _INCOMPLETE.get(incomplete_reason, incomplete_reason)
    if status == "failed":
        return "error"
    if status == "cancelled":
        return "cancelled"
    return None


def _usage(usage: Mapping[str, Any]) -> Usage:
    given = mapping(usage.get("input_tokens_details"))
    made = mapping(usage.get("output_tokens_details"))
    return Usage(input_tokens=integer(usage.get("input_tokens")), output_tokens=integer(usage.get("output_tokens")),
                 cache_read_input_tokens=integer(given.get("cached_tokens")),
                 cache_creation_input_tokens=integer(given.get("cache_write_tokens")),
                 reasoning_output_tokens=integer(made.get("reasoning_tokens")))


def _tool_calls(output: Iterable[Mapping[str, Any]]) -> tuple[ToolCall, ...]:
    found = []
    for item in output:
        kind = item.get("type")
        if kind == "function_call":
            found.append(ToolCall(text(item.get("call_id")), text(item.get("name")), text(item.get("arguments"))))
        elif kind == "custom_tool_call":
            found.append(ToolCall(text(item.get("call_id")), text(item.get("name")), text(item.get("input"))))
    return tuple(found)


class _Output:
    """A stream's output items put together from its events, for when no event carries the
    finished response (a stream that ended early): each item as `response.output_item.added`
    gave it, its text, arguments and reasoning added delta by delta, and replaced whole by
    `response.output_item.done`."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: dict[int, dict[str, Any]] = {}

    def items(self) -> list[dict[str, Any]]:
        return [self._items[index] for index in sorted(self._items)]

    def event(self, kind: str, event: Mapping[str, Any]) -> None:
        index = event.get("output_index")
        if type(index) is not int:
            return
        if kind in ("response.output_item.added", "response.output_item.done"):
            if isinstance(item := event.get("item"), dict):
                self._items[index] = dict(item)
            return
        item = self._items.get(index)
        if item is None:
            return
        delta = event.get("delta")
        if kind in _PART_ADDED:
            key, at = _PART_ADDED[kind]
            if isinstance(part := event.get("part"), dict):
                slot = _slot(item, key, event.get(at), str(part.get("type")))
                slot.clear()
                slot.update(part)
        elif not isinstance(delta, str):
            return
        elif kind in _PART_DELTAS:
            key, at, part_type, field = _PART_DELTAS[kind]
            slot = _slot(item, key, event.get(at), part_type)
            slot[field] = str(slot.get(field) or "") + delta
        elif kind in _ITEM_DELTAS:
            field = _ITEM_DELTAS[kind]
            item[field] = str(item.get(field) or "") + delta


# A delta to a part of an item: (the item's list, the event's index into it, the part's
# type when the delta makes it, the part's field the delta adds to).
_PART_DELTAS = {
    "response.output_text.delta": ("content", "content_index", "output_text", "text"),
    "response.refusal.delta": ("content", "content_index", "refusal", "refusal"),
    "response.reasoning_text.delta": ("content", "content_index", "reasoning_text", "text"),
    "response.reasoning_summary_text.delta": ("summary", "summary_index", "summary_text", "text"),
}
_PART_ADDED = {"response.content_part.added": ("content", "content_index"),
               "response.reasoning_summary_part.added": ("summary", "summary_index")}
# A delta to an item's own field.
_ITEM_DELTAS = {"response.function_call_arguments.delta": "arguments",
                "response.custom_tool_call_input.delta": "input"}


def _slot(item: dict[str, Any], key: str, index: Any, kind: str) -> dict[str, Any]:
    """The part at `index` of the item's `key` list, made (of type `kind`) where there is none."""
    parts = item.get(key)
    if not isinstance(parts, list):
        parts = item[key] = []
    position = index if type(index) is int and 0 <= index < 10_000 else len(parts)
    while len(parts) <= position:
        parts.append({"type": kind})
    if not isinstance(parts[position], dict):
        parts[position] = {"type": kind}
    part: dict[str, Any] = parts[position]
    return part


class _Answer:
    """An answer read from a response object (a JSON answer, or a stream's events that carry
    one), or, for a stream that ended early, from its output items put together."""

    __slots__ = ("content", "failed", "id", "incomplete", "model", "output", "status", "tier", "usage")

    def __init__(self, *, content: bool) -> None:
        self.content = content
        self.id: str | None = None
        self.model: str | None = None
        self.tier: str | None = None
        self.status: str | None = None
        self.incomplete: Any = None
        self.usage: Usage | None = None
        self.output: list[dict[str, Any]] = []
        self.failed = False

    def read_response(self, response: Mapping[str, Any]) -> None:
        get = response.get
        if isinstance(value := get("id"), str):
            self.id = value
        if isinstance(value := get("model"), str):
            self.model = value
        if isinstance(value := get("service_tier"), str):
            self.tier = value
        if isinstance(value := get("status"), str):
            self.status = value
        self.incomplete = mapping(get("incomplete_details")).get("reason")
        if isinstance(usage := get("usage"), dict):
            self.usage = _usage(usage)
        if isinstance(output := get("output"), list):
            self.output = items(output)

    def result(self) -> CallResponse:
        finish = "error" if self.failed else finish_reason(self.status, self.incomplete, self.output)
        messages = None
        if self.content and (self.output or finish is not None):
            parts = [part for item in self.output for part in item_parts(item)]
            messages = [{"role": "assistant", "parts": parts, "finish_reason": finish or "error"}]
        return CallResponse(id=self.id, model=self.model, finish_reasons=(finish,) if finish else (),
                            usage=self.usage or Usage(), tool_calls=_tool_calls(self.output),
                            output_messages=messages, service_tier=self.tier)


class _Stream:
    """A stream of `response.*` events. With content off, an event is decoded only when it is
    the first or carries the response object (its head and its end: id, model, status,
    usage, and the finished output's tool calls) or an error: the deltas are timed, never
    decoded. With content on every event is read, so that a stream that ended early still
    gives the output it had."""

    __slots__ = ("_answer", "_decode_every", "_ended", "_first", "_output")

    def __init__(self, *, content: bool) -> None:
        self._answer = _Answer(content=content)
        self._decode_every = content
        self._first = True
        self._ended = False
        self._output = _Output() if content else None

    def wants(self, data: bytes) -> bool:
        if self._first or self._decode_every:
            self._first = False
            return True
        return _WANTED_IN_EVENT.search(data) is not None

    def event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if not isinstance(kind, str):
            return
        answer = self._answer
        if kind == "error":
            answer.failed = True
            return
        response = event.get("response")
        if isinstance(response, dict) and (kind in _TERMINAL or kind in _SNAPSHOTS):
            answer.read_response(response)
            self._ended = self._ended or kind in _TERMINAL
        elif self._output is not None and not self._ended:
            self._output.event(kind, event)

    def result(self) -> CallResponse:
        answer = self._answer
        if not self._ended and self._output is not None:
            answer.output = self._output.items()
        return answer.result()


class Responses:
    """The Responses reading (`cafe.apis.Api`)."""

    name = NAME
    operation = Operation.CHAT
    request_keys = frozenset({
        "conversation", "max_output_tokens", "model", "previous_response_id", "service_tier", "stream",
        "temperature", "text", "top_p"
    })

    def handles(self, method: str, path: str) -> bool:
        return method == "POST" and path.endswith(_PATH_SUFFIX)

    def request(self, body: Mapping[str, Any], *, host: str | None) -> CallRequest:
        conversation = body.get("conversation")
        if isinstance(conversation, dict):
            conversation = conversation.get("id")
        return CallRequest(
            api=NAME, operation=Operation.CHAT, provider=provider_for(host, "openai"),
            model=text(body.get("model")), stream=body.get("stream") is True,
            max_tokens=integer(body.get("max_output_tokens")), temperature=number(body.get("temperature")),
            top_p=number(body.get("top_p")), output_type=output_type(mapping(body.get("text")).get("format")),
            service_tier=text(body.get("service_tier")), conversation_id=text(conversation),
            previous_response_id=text(body.get("previous_response_id")))

    def request_content(self, body: Mapping[str, Any]) -> RequestContent:
        return RequestContent(system_instructions=system_instructions(body.get("instructions")),
                              input_messages=input_messages(body.get("input")),
                              tool_definitions=tool_definitions(items(body.get("tools"))))

    def response(self, document: Mapping[str, Any], *, content: bool) -> CallResponse:
        answer = _Answer(content=content)
        answer.read_response(document)
        return answer.result()

    def stream(self, *, content: bool) -> _Stream:
        return _Stream(content=content)

    def assembled(self, events: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
        """The finished response a terminal event carries; for a stream that ended before
        one, the last response object it gave with the output items put together from the
        events, and `status: failed` after an `error` event."""
        snapshot: dict[str, Any] | None = None
        output = _Output()
        error: Mapping[str, Any] | None = None
        for event in events:
            kind = event.get("type")
            if kind == "error":
                error = event
                continue
            if not isinstance(kind, str) or not kind.startswith("response."):
                continue
            response = event.get("response")
            if kind in _TERMINAL and isinstance(response, dict):
                return dict(response)
            if kind in _SNAPSHOTS and isinstance(response, dict):
                snapshot = dict(response)
            else:
                output.event(kind, event)
                snapshot = snapshot if snapshot is not None else {"object": "response"}
        if snapshot is None:
            return None
        snapshot["output"] = output.items()
        if error is not None:
            snapshot["status"] = "failed"
            snapshot["error"] = {"code": error.get("code"), "message": error.get("message")}
        return snapshot

    def summary(self, body: Mapping[str, Any]) -> str:
        given = body.get("input")
        if isinstance(given, str):
            said = "a text input"
        elif not (entries := items(given)):
            said = "no input"
        else:
            last = entries[-1]
            role, kind = last.get("role"), last.get("type")
            if kind in ("message", None) and isinstance(role, str):
                shown = role if role.isidentifier() and len(role) <= 20 else "?"
                said = f"{len(entries)} input item(s), the last from {shown}"
            else:
                shown = kind if isinstance(kind, str) and kind.isidentifier() and len(kind) <= 40 else "?"
                said = f"{len(entries)} input item(s), the last a {shown}"
        if isinstance(body.get("previous_response_id"), str):
            said += ", after a previous response"
        return said


API = Responses()
