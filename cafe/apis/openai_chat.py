"""OpenAI Chat Completions (`POST .../chat/completions`): the request, a JSON answer, and a
stream of `chat.completion.chunk` events.

Spoken by OpenAI, Azure OpenAI and every OpenAI-compatible server (groq, ollama, vLLM, ...).
The system prompt is a message of the history here, so it stays in the input messages."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

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
    output_type,
    provider_for,
    strings,
    text,
)

NAME = "openai.chat_completions"
_PATH_SUFFIX = "/chat/completions"

# The chat finish reasons onto the conventions' output-message enumeration.
_FINISH = {"stop": "stop", "length": "length", "content_filter": "content_filter",
           "tool_calls": "tool_call", "function_call": "tool_call"}
# An event that sets a finish reason (a string, not null) or carries the usage (an object):
# a key's closing quote is never inside a JSON string (a quote there is escaped), so an
# event's text cannot fake one; a false match only costs a decode.
_WANTED_IN_EVENT = re.compile(rb'"(?:finish_reason"\s*:\s*"|usage"\s*:\s*\{)')
# (the key as it appears in an event, the field)
_HEAD_KEYS = ((b'"id"', "id"), (b'"model"', "model"), (b'"system_fingerprint"', "system_fingerprint"),
              (b'"service_tier"', "service_tier"))


def _media_part(url: Any, modality: str) -> Part:
    """An image (or other media) part: a data URL's bytes as a blob, any other URL as a uri."""
    if isinstance(url, str) and url.startswith("data:") and "," in url:
        head, _, data = url.partition(",")
        mime = head[5:].split(";", 1)[0] or None
        return {"type": "blob", "modality": modality, "mime_type": mime, "content": data}
    return {"type": "uri", "modality": modality, "uri": url}


def _content_part(item: Any) -> Part:
    kind = item.get("type") if isinstance(item, dict) else None
    if kind in ("text", "input_text", "output_text"):
        return {"type": "text", "content": str(item.get("text", ""))}
    if kind == "refusal":
        return {"type": "text", "content": str(item.get("refusal", ""))}
    if kind == "image_url":
        return _media_part(mapping(item.get("image_url")).get("url"), "image")
    if kind == "input_audio":
        audio = mapping(item.get("input_audio"))
        return {"type": "blob", "modality": "audio", "mime_type": f"audio/{audio.get('format', 'wav')}",
                "content": str(audio.get("data", ""))}
    if kind == "file":
        file = mapping(item.get("file"))
        if isinstance(file.get("file_id"), str):
            return {"type": "file", "modality": "document", "file_id": file["file_id"]}
    return other_part(kind)


def _text_parts(content: Any) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    if isinstance(content, list):  # content parts
        return [_content_part(item) for item in content]
    return [{"type": "text", "content": str(content)}]


def message_parts(message: Mapping[str, Any]) -> list[Part]:
    """A chat message's parts: its text, the tools it calls, or the tool result it carries."""
    if message.get("role") == "tool":
        result = message.get("content")
        if isinstance(result, list):  # content parts: their text
            texts = [part for part in _text_parts(result) if part.get("type") == "text"]
            result = "".join(str(part["content"]) for part in texts) if len(texts) == len(result) else result
        return [{"type": "tool_call_response", "id": message.get("tool_call_id"), "response": maybe_json(result)}]
    parts = _text_parts(message.get("content"))
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        parts.append({"type": "text", "content": refusal})
    for call in items(message.get("tool_calls")):
        function = mapping(call.get("function"))
        parts.append({"type": "tool_call", "id": call.get("id"), "name": function.get("name"),
                      "arguments": maybe_json(function.get("arguments"))})
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        parts.append({"type": "tool_call", "id": None, "name": legacy.get("name"),
                      "arguments": maybe_json(legacy.get("arguments"))})
    return parts


def input_messages(messages: Iterable[Mapping[str, Any]]) -> list[Message]:
    return [{"role": message.get("role"), "parts": message_parts(message)} for message in messages]


def tool_definitions(tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for tool in tools:
        function = mapping(tool.get("function"))
        found.append({"type": tool.get("type", "function"), "name": function.get("name"),
                      "description": function.get("description"), "parameters": function.get("parameters")})
    return found


def finish_reason(raw: Any) -> str:
    """A chat finish reason as the conventions' output message spells it."""
    return _FINISH.get(str(raw), "error" if raw is None else str(raw))


def output_messages(choices: Iterable[tuple[Mapping[str, Any], Any]]) -> list[Message]:
    """(message, finish reason) of each choice, as output messages."""
    return [{"role": message.get("role") or "assistant", "parts": message_parts(message),
             "finish_reason": finish_reason(raw)} for message, raw in choices]


def _usage(usage: Mapping[str, Any]) -> Usage:
    prompt = mapping(usage.get("prompt_tokens_details"))
    completion = mapping(usage.get("completion_tokens_details"))
    return Usage(input_tokens=integer(usage.get("prompt_tokens")),
                 output_tokens=integer(usage.get("completion_tokens")),
                 cache_read_input_tokens=integer(prompt.get("cached_tokens")),
                 reasoning_output_tokens=integer(completion.get("reasoning_tokens")))


def _tool_calls(message: Mapping[str, Any]) -> list[ToolCall]:
    found = []
    for call in items(message.get("tool_calls")):
        function = mapping(call.get("function"))
        found.append(ToolCall(text(call.get("id")), text(function.get("name")), text(function.get("arguments"))))
    return found


class _Answer:
    """An answer put together from a JSON document or from a stream's chunks."""

    __slots__ = ("content", "fingerprint", "finish", "id", "messages", "model", "tier", "usage")

    def __init__(self, *, content: bool) -> None:
        self.id: str | None = None
        self.model: str | None = None
        self.fingerprint: str | None = None
        self.tier: str | None = None
        self.usage: Usage | None = None
        self.finish: dict[int, str] = {}
        self.content = content
        self.messages: dict[int, dict[str, Any]] = {}  # index -> the assistant message put together

    def read_head(self, document: Mapping[str, Any]) -> None:
        get = document.get
        if self.id is None and isinstance(value := get("id"), str):
            self.id = value
        if self.model is None and isinstance(value := get("model"), str):
            self.model = value
        if self.fingerprint is None and isinstance(value := get("system_fingerprint"), str):
            self.fingerprint = value
        if self.tier is None and isinstance(value := get("service_tier"), str):
            self.tier = value
        usage = get("usage")
        if isinstance(usage, dict):
            self.usage = _usage(usage)

    def head_missing(self) -> tuple[bytes, ...]:
        return tuple(key for key, name in _HEAD_KEYS if getattr(self, _ATTRIBUTE[name]) is None)

    def read_choices(self, document: Mapping[str, Any], *, delta: bool) -> None:
        choices = document.get("choices")
        if not isinstance(choices, list):
            return
        for position, choice in enumerate(choices):
            if not isinstance(choice, dict):
                continue
            index = choice.get("index")
            index = index if type(index) is int else position
            reason = choice.get("finish_reason")
            if isinstance(reason, str):
                self.finish[index] = reason
            part = choice.get("delta" if delta else "message")
            if isinstance(part, dict) and (self.content or not delta):
                self._merge(index, part, delta=delta)

    def _merge(self, index: int, part: Mapping[str, Any], *, delta: bool) -> None:
        message = self.messages.setdefault(index, {"role": "assistant"})
        if not delta:
            message.update(part)
            return
        if isinstance(part.get("role"), str):
            message["role"] = part["role"]
        for key in ("content", "refusal"):
            if isinstance(part.get(key), str):
                message[key] = (message.get(key) or "") + part[key]
        for call in items(part.get("tool_calls")):
            calls: list[dict[str, Any]] = message.setdefault("tool_calls", [])
            at = call.get("index")
            position: int = at if type(at) is int else len(calls)
            while len(calls) <= position:
                calls.append({"id": None, "type": "function", "function": {"name": None, "arguments": ""}})
            known = calls[position]
            if isinstance(call.get("id"), str):
                known["id"] = call["id"]
            if isinstance(call.get("type"), str):
                known["type"] = call["type"]
            function = mapping(call.get("function"))
            if isinstance(function.get("name"), str):
                known["function"]["name"] = (known["function"]["name"] or "") + function["name"]
            if isinstance(function.get("arguments"), str):
                known["function"]["arguments"] += function["arguments"]

    def result(self) -> CallResponse:
        finish = self.finish
        reasons = (tuple(finish.values()) if len(finish) == 1
                   else tuple(finish[index] for index in sorted(finish)))
        messages = self.messages
        calls = tuple(call for index in sorted(messages) for call in _tool_calls(messages[index]))
        output = None
        if self.content:
            output = output_messages((messages.get(index, {"role": "assistant"}), finish.get(index))
                                     for index in sorted(set(messages) | set(finish)))
        return CallResponse(id=self.id, model=self.model, finish_reasons=reasons, usage=self.usage or Usage(),
                            tool_calls=calls, output_messages=output, system_fingerprint=self.fingerprint,
                            service_tier=self.tier)

_ATTRIBUTE = {"id": "id", "model": "model", "system_fingerprint": "fingerprint", "service_tier": "tier"}


class _Stream:
    """A `chat.completion.chunk` stream. With content off, an event is decoded only when it is
    the first, names a head field still unknown, sets a finish reason or carries the usage:
    the words in between are timed, never decoded."""

    __slots__ = ("_answer", "_decode_every", "_first", "_head_missing")

    def __init__(self, *, content: bool) -> None:
        self._answer = _Answer(content=content)
        self._decode_every = content
        self._first = True
        self._head_missing: tuple[bytes, ...] = ()

    def wants(self, data: bytes) -> bool:
        if self._first or self._decode_every:
            self._first = False
            return True
        return _WANTED_IN_EVENT.search(data) is not None or (
            bool(self._head_missing) and any(key in data for key in self._head_missing))

    def event(self, event: Mapping[str, Any]) -> None:
        answer = self._answer
        answer.read_head(event)
        answer.read_choices(event, delta=True)
        self._head_missing = answer.head_missing()

    def result(self) -> CallResponse:
        return self._answer.result()


class ChatCompletions:
    """The Chat Completions reading (`cafe.apis.Api`)."""

    name = NAME
    operation = Operation.CHAT
    request_keys = frozenset({
        "frequency_penalty", "max_completion_tokens", "max_tokens", "modalities", "model", "n", "presence_penalty",
        "response_format", "seed", "service_tier", "stop", "stream", "temperature", "top_p"
    })

    def handles(self, method: str, path: str) -> bool:
        return method == "POST" and path.endswith(_PATH_SUFFIX)

    def request(self, body: Mapping[str, Any], *, host: str | None) -> CallRequest:
        max_tokens = integer(body.get("max_completion_tokens"))
        if max_tokens is None:
            max_tokens = integer(body.get("max_tokens"))
        choices = integer(body.get("n"))
        modalities = body.get("modalities")
        kind = output_type(body.get("response_format"))
        if kind is None and isinstance(modalities, list) and "audio" in modalities:
            kind = "speech"
        return CallRequest(
            api=NAME, operation=Operation.CHAT, provider=provider_for(host, "openai"),
            model=text(body.get("model")), stream=body.get("stream") is True, max_tokens=max_tokens,
            temperature=number(body.get("temperature")), top_p=number(body.get("top_p")),
            frequency_penalty=number(body.get("frequency_penalty")),
            presence_penalty=number(body.get("presence_penalty")), stop_sequences=strings(body.get("stop")),
            seed=integer(body.get("seed")), choice_count=choices if choices is not None and choices != 1 else None,
            output_type=kind, service_tier=text(body.get("service_tier")))

    def request_content(self, body: Mapping[str, Any]) -> RequestContent:
        return RequestContent(input_messages=input_messages(items(body.get("messages"))),
                              tool_definitions=tool_definitions(items(body.get("tools"))))

    def response(self, document: Mapping[str, Any], *, content: bool) -> CallResponse:
        answer = _Answer(content=content)
        answer.read_head(document)
        answer.read_choices(document, delta=False)
        return answer.result()

    def stream(self, *, content: bool) -> _Stream:
        return _Stream(content=content)

    def assembled(self, events: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
        head: dict[str, Any] = {}
        choices: dict[int, dict[str, Any]] = {}
        usage: Any = None
        seen = False
        for event in events:
            if event.get("object") != "chat.completion.chunk":
                continue
            seen = True
            for key in ("id", "created", "model", "system_fingerprint", "service_tier"):
                if event.get(key) is not None:
                    head.setdefault(key, event[key])
            if event.get("usage") is not None:
                usage = event["usage"]
            for choice in items(event.get("choices")):
                _merge_choice(choices, choice)
        if not seen:
            return None
        return {**head, "object": "chat.completion", "choices": [choices[index] for index in sorted(choices)],
                "usage": usage}

    def summary(self, body: Mapping[str, Any]) -> str:
        messages = items(body.get("messages"))
        if not messages:
            return "no messages"
        role = messages[-1].get("role")
        shown = role if isinstance(role, str) and role.isidentifier() and len(role) <= 20 else "?"
        return f"{len(messages)} message(s), the last from {shown}"


def _merge_choice(choices: dict[int, dict[str, Any]], choice: Mapping[str, Any]) -> None:
    """One chunk's choice added to the unstreamed document's choice of its index."""
    found_index = choice.get("index")
    index: int = found_index if isinstance(found_index, int) else 0
    into = choices.setdefault(index, {"index": index, "message": {"role": "assistant", "content": None},
                                      "finish_reason": None})
    message = into["message"]
    delta = mapping(choice.get("delta"))
    if isinstance(delta.get("role"), str):
        message["role"] = delta["role"]
    if isinstance(delta.get("content"), str):
        message["content"] = (message["content"] or "") + delta["content"]
    if isinstance(delta.get("refusal"), str):
        message["refusal"] = (message.get("refusal") or "") + delta["refusal"]
    for call in items(delta.get("tool_calls")):
        calls = message.setdefault("tool_calls", [])
        found_position = call.get("index")
        position: int = found_position if isinstance(found_position, int) else len(calls)
        while len(calls) <= position:
            calls.append({"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
        target = calls[position]
        if isinstance(call.get("id"), str):
            target["id"] = call["id"]
        if isinstance(call.get("type"), str):
            target["type"] = call["type"]
        function = mapping(call.get("function"))
        for key in ("name", "arguments"):
            if isinstance(function.get(key), str):
                target["function"][key] += function[key]
    if choice.get("finish_reason") is not None:
        into["finish_reason"] = choice["finish_reason"]


API = ChatCompletions()
