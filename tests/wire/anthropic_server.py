"""A local Anthropic-compatible server for tests: the Messages API, `POST /v1/messages`, and
`POST /v1/messages/count_tokens`, on 127.0.0.1.

It answers a message as plain JSON, or as server-sent events when the request says
`"stream": true`, in the API's order: `message_start`, then for each content block
`content_block_start` (a `ping` after the first), its deltas (`text_delta` a word,
`thinking_delta` and one `signature_delta`, `input_json_delta` pieces after an empty one),
`content_block_stop`; then `message_delta` (the stop reason and the output usage) and
`message_stop`, each an `event:` line and a `data:` line.

What it answers follows from the request, as the API's would:
- a request with client `tools` whose last message holds no `tool_result` gets a `tool_use`
  block for its first tool (or the one `tool_choice` names), after a line of text, and
  `stop_reason: "tool_use"`; the next request, carrying the `tool_result`, gets a text reply
  that quotes it;
- `thinking: {"type": "enabled"}` adds a `thinking` block first (with a signature) and its
  tokens as `output_tokens_details.thinking_tokens`;
- the prompt up to the last `cache_control` breakpoint is written to the cache the first time
  it is seen (`cache_creation_input_tokens`) and read from it after
  (`cache_read_input_tokens`); `input_tokens` counts only the rest, as Anthropic's does;
- `max_tokens` cuts the reply (`stop_reason: "max_tokens"`), a `stop_sequences` word ends it
  (`stop_reason: "stop_sequence"`).

It counts the requests it receives, and can be told to fail the next requests with
Anthropic's error body (`{"type": "error", "error": {...}, "request_id": ...}`: 429
`rate_limit_error`, 529 `overloaded_error`, others by their status) or to break the next
streams with an `error` event after some deltas, as an overloaded stream does.

    with AnthropicServer.running() as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key="sk-ant-test-...")
        ...
        assert server.count == 1

The answer is a deterministic function of the request (and of which cache prefixes came
before), so a changed request gets a changed answer and a replay can be compared with a
live run.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.local_http import QuietHandler, serving

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
               529: "overloaded_error"}
REPLY_WORDS = 8  # a reply's words when max_tokens does not cut it short
MESSAGE_OVERHEAD_TOKENS = 4  # what a message adds to the input beyond its words


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None


def _block_texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    found = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("text"), str):
            found.append(block["text"])
        elif block.get("type") == "tool_result":
            found.extend(_block_texts(block.get("content")))
        elif block.get("type") == "tool_use":
            found.append(json.dumps(block.get("input")))
    return found


def last_text(body: dict[str, Any]) -> str | None:
    """The text of the request's last message: a string, or its text blocks joined."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return None
    content = messages[-1].get("content")
    if isinstance(content, list):
        return "".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    return content if isinstance(content, str) else None


def _tool_result(body: dict[str, Any]) -> str | None:
    """The text of the `tool_result` the last message carries, if it carries one."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return None
    content = messages[-1].get("content")
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("type") == "tool_result":
            return " ".join(_block_texts(block.get("content")))
    return None


def _client_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    """The client tool the model calls, when it calls one."""
    if _tool_result(body) is not None:
        return None
    choice = body.get("tool_choice") if isinstance(body.get("tool_choice"), dict) else {}
    if choice.get("type") == "none":
        return None
    tools = [tool for tool in body.get("tools") or ()
             if isinstance(tool, dict) and tool.get("type") in (None, "custom")]
    if choice.get("type") == "tool":
        tools = [tool for tool in tools if tool.get("name") == choice.get("name")]
    return tools[0] if tools else None


def _tool_input(tool: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """The tool's first parameter set to the last message's text."""
    properties = (tool.get("input_schema") or {}).get("properties") or {}
    return {name: last_text(body) or "" for name in list(properties)[:1]}


def answer_words(body: dict[str, Any]) -> list[str]:
    """The words of the reply to `body`, at most `max_tokens` of them."""
    digest = hashlib.sha256(json.dumps([last_text(body), body.get("max_tokens")]).encode()).hexdigest()
    result = _tool_result(body)
    if result is not None:
        words = ["The", "tool", "said:", *result.split()[:6], digest[:6]]
    else:
        words = ["Sure", "one", "latte", "coming", "up", "at", "table", digest[:6]]  # REPLY_WORDS
    if _client_tool(body) is not None:
        words = ["Let", "me", "check."]
    limit = body.get("max_tokens")
    if isinstance(limit, int) and limit > 0:
        words = words[:limit]
    for position, word in enumerate(words):
        if word in (body.get("stop_sequences") or ()):
            return words[:position]
    return words


def message_id(body: dict[str, Any]) -> str:
    return "msg_" + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]


def _stop(body: dict[str, Any], words: list[str]) -> tuple[str, str | None]:
    """The stop reason and the stop sequence met, if any."""
    full = answer_words({**body, "stop_sequences": None})
    if len(words) < len(full) and full[len(words)] in (body.get("stop_sequences") or ()):
        return "stop_sequence", full[len(words)]
    if _client_tool(body) is not None:
        return "tool_use", None
    limit = body.get("max_tokens")
    return ("max_tokens" if isinstance(limit, int) and len(words) == limit < REPLY_WORDS else "end_turn"), None


def _thinking(body: dict[str, Any]) -> str | None:
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") not in ("enabled", "adaptive"):
        return None
    return f"The guest asks: {last_text(body) or 'nothing'}. A short answer will do."


def _tokens(texts: list[str]) -> int:
    return sum(len(text.split()) for text in texts)


def _prompt_pieces(body: dict[str, Any]) -> list[tuple[list[str], bool]]:
    """The prompt in its cache order (tools, system, messages): each piece's texts, and
    whether a `cache_control` breakpoint ends it."""
    pieces: list[tuple[list[str], bool]] = []
    for tool in body.get("tools") or ():
        if isinstance(tool, dict):
            pieces.append(([json.dumps(tool.get("input_schema")), str(tool.get("description", ""))],
                           "cache_control" in tool))
    system = body.get("system")
    if isinstance(system, str):
        pieces.append(([system], False))
    for block in system if isinstance(system, list) else ():
        if isinstance(block, dict):
            pieces.append(([str(block.get("text", ""))], "cache_control" in block))
    for message in body.get("messages") or ():
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else [content]
        for position, block in enumerate(blocks):
            texts = _block_texts([block] if isinstance(block, dict) else block)
            overhead = ["m"] * MESSAGE_OVERHEAD_TOKENS if position == 0 else []
            pieces.append(([*texts, " ".join(overhead)], isinstance(block, dict) and "cache_control" in block))
    return pieces


def message(body: dict[str, Any], cache: dict[str, int] | None = None) -> dict[str, Any]:
    """The Messages API's answer to `body`, whole. `cache` holds the prefixes written to the
    cache so far (it is added to: pass the server's own)."""
    words = answer_words(body)
    stop_reason, stop_sequence = _stop(body, words)
    content: list[dict[str, Any]] = []
    thinking = _thinking(body)
    if thinking is not None:
        signature = hashlib.sha256(thinking.encode()).hexdigest()
        content.append({"type": "thinking", "thinking": thinking, "signature": signature})
    if words:
        content.append({"type": "text", "text": " ".join(words)})
    tool = _client_tool(body)
    if tool is not None:
        content.append({"type": "tool_use", "id": "toolu_" + message_id(body)[4:], "name": tool.get("name"),
                        "input": _tool_input(tool, body)})
    pieces = _prompt_pieces(body)
    total = _tokens([text for texts, _ in pieces for text in texts])
    breakpoints = [position for position, (_, marked) in enumerate(pieces) if marked]
    read = created = 0
    if breakpoints:
        prefix = pieces[:breakpoints[-1] + 1]
        key = hashlib.sha256(json.dumps(prefix).encode()).hexdigest()
        size = _tokens([text for texts, _ in prefix for text in texts])
        if cache is not None and key in cache:
            read = size
        else:
            created = size
            if cache is not None:
                cache[key] = size
    thought = len(thinking.split()) if thinking is not None else 0
    usage: dict[str, Any] = {"input_tokens": total - read - created, "cache_creation_input_tokens": created,
                             "cache_read_input_tokens": read, "output_tokens": len(words) + thought + (
                                 len(json.dumps(content[-1]["input"]).split()) if tool is not None else 0),
                             "service_tier": "standard"}
    if thinking is not None:
        usage["output_tokens_details"] = {"thinking_tokens": thought}
    return {"id": message_id(body), "type": "message", "role": "assistant",
            "model": body.get("model", "test-model"), "content": content,
            "stop_reason": stop_reason, "stop_sequence": stop_sequence, "usage": usage}


def events(body: dict[str, Any], cache: dict[str, int] | None = None,
           break_after: int | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """The Messages API's stream of events answering `body`: (event name, data). With
    `break_after`, an `overloaded_error` event follows that many deltas and the stream ends."""
    whole = message(body, cache)
    started = {**whole, "content": [], "stop_reason": None, "stop_sequence": None,
               "usage": {**whole["usage"], "output_tokens": 1}}
    started["usage"].pop("output_tokens_details", None)
    yield "message_start", {"type": "message_start", "message": started}
    deltas = 0
    for index, block in enumerate(whole["content"]):
        kind = block["type"]
        if kind == "thinking":
            empty: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
            pieces = [{"type": "thinking_delta", "thinking": word + " "} for word in block["thinking"].split(" ")]
            pieces.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "text":
            empty = {"type": "text", "text": ""}
            pieces = [{"type": "text_delta", "text": word if position == 0 else " " + word}
                      for position, word in enumerate(block["text"].split(" "))]
        else:
            empty = {**block, "input": {}}
            written = json.dumps(block["input"])
            pieces = [{"type": "input_json_delta", "partial_json": ""},
                      *({"type": "input_json_delta", "partial_json": written[at:at + 8]}
                        for at in range(0, len(written), 8))]
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": empty}
        if index == 0:
            yield "ping", {"type": "ping"}
        for piece in pieces:
            if break_after is not None and deltas == break_after:
                yield "error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
                return
            deltas += 1
            yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": piece}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": whole["stop_sequence"]},
                            "usage": {key: value for key, value in whole["usage"].items()
                                      if key in ("output_tokens", "output_tokens_details")}}
    yield "message_stop", {"type": "message_stop"}


class AnthropicServer:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._failures: list[int] = []
        self._breaks: list[int] = []
        self.cache: dict[str, int] = {}
        self._port: int | None = None

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.received)

    @property
    def port(self) -> int:
        assert self._port is not None
        return self._port

    @property
    def base_url(self) -> str:
        """What `anthropic.Anthropic(base_url=...)` takes: the SDK adds `/v1/messages`."""
        return f"http://127.0.0.1:{self.port}"

    def fail_next(self, *statuses: int) -> None:
        """Answer the next requests with these statuses, each with Anthropic's error body."""
        with self._lock:
            self._failures.extend(statuses)

    def break_next_streams(self, *after_deltas: int) -> None:
        """End the next streams with an `overloaded_error` event, each after that many deltas."""
        with self._lock:
            self._breaks.extend(after_deltas)

    def _take(self, pending: list[int]) -> int | None:
        with self._lock:
            return pending.pop(0) if pending else None

    def _note(self, received: Received) -> None:
        with self._lock:
            self.received.append(received)

    @classmethod
    @contextmanager
    def running(cls) -> Iterator[AnthropicServer]:
        server = cls()
        with serving(_handler_for(server), name="anthropic-server") as port:
            server._port = port
            yield server


def _handler_for(server: AnthropicServer) -> type[BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status: int, payload: dict[str, Any], extra: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("request-id", self._request_id())
            for name, value in (extra or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _request_id(self) -> str:
            return f"req_{server.count:024d}"

        def _error(self, status: int, message: str, extra: dict[str, str] | None = None) -> None:
            kind = ERROR_TYPES.get(status, "api_error")
            self._send(status, {"type": "error", "error": {"type": kind, "message": message},
                                "request_id": self._request_id()}, extra)

        def do_POST(self) -> None:
            raw = self.read_body()
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            server._note(Received("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            failure = server._take(server._failures)
            if failure is not None:
                self._error(failure, "Overloaded" if failure == 529 else "try again",
                            {"retry-after": "0", "x-should-retry": "false"})
                return
            path = self.path.partition("?")[0]
            if path == "/v1/messages/count_tokens" and isinstance(body, dict):
                pieces = _prompt_pieces(body)
                self._send(200, {"input_tokens": _tokens([text for texts, _ in pieces for text in texts])})
                return
            if path != "/v1/messages":
                self._error(404, f"Not found: {path}")
                return
            if not isinstance(body, dict) or not isinstance(body.get("max_tokens"), int):
                self._error(400, "max_tokens: Field required")
                return
            if not body.get("stream"):
                with server._lock:
                    answer = message(body, server.cache)
                self._send(200, answer)
                return
            with server._lock:
                answered = list(events(body, server.cache, server._breaks.pop(0) if server._breaks else None))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("request-id", self._request_id())
            self.end_headers()
            for name, data in answered:
                self._chunk(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            try:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                pass

        def _chunk(self, data: bytes) -> None:
            try:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            except OSError:  # the client closed the stream early
                pass

    return Handler
