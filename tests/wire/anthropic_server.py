"""A local Anthropic-compatible server for tests: the Messages API, `POST /v1/messages`, on
127.0.0.1.

It answers a message as plain JSON, or as server-sent events when the request says
`"stream": true` (`message_start`, `content_block_start`, `ping`, one `content_block_delta`
a word, `content_block_stop`, `message_delta`, `message_stop`, each an `event:` line and a
`data:` line), counts the requests it receives, and can be told to fail the next requests
with Anthropic's error body (`{"type": "error", "error": {...}}`: 429 `rate_limit_error`,
529 `overloaded_error`, others `api_error`).

    with AnthropicServer.running() as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key="sk-ant-test-...")
        ...
        assert server.count == 1

The answer is a deterministic function of the request (its last message's text and
`max_tokens`), so a changed request gets a changed answer and a replay can be compared with
a live run.
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

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
               429: "rate_limit_error", 529: "overloaded_error"}
REPLY_WORDS = 8  # a reply's words when max_tokens does not cut it short


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None


def last_text(body: dict[str, Any]) -> str | None:
    """The text of the request's last message: a string, or its text blocks joined."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return None
    content = messages[-1].get("content")
    if isinstance(content, list):
        return "".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    return content if isinstance(content, str) else None


def answer_words(body: dict[str, Any]) -> list[str]:
    """The words of the reply to `body`, at most `max_tokens` of them."""
    digest = hashlib.sha256(json.dumps([last_text(body), body.get("max_tokens")]).encode()).hexdigest()
    words = ["Sure", "one", "latte", "coming", "up", "at", "table", digest[:6]]  # REPLY_WORDS
    limit = body.get("max_tokens")
    if isinstance(limit, int) and limit > 0:
        words = words[:limit]
    return words


def message_id(body: dict[str, Any]) -> str:
    return "msg_" + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]


def _stop_reason(body: dict[str, Any], words: list[str]) -> str:
    limit = body.get("max_tokens")
    return "max_tokens" if isinstance(limit, int) and len(words) == limit < REPLY_WORDS else "end_turn"


def _usage(output_tokens: int) -> dict[str, Any]:
    return {"input_tokens": 11, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
            "output_tokens": output_tokens, "service_tier": "standard"}


def message(body: dict[str, Any]) -> dict[str, Any]:
    """The Messages API's answer to `body`, whole."""
    words = answer_words(body)
    return {"id": message_id(body), "type": "message", "role": "assistant",
            "model": body.get("model", "test-model"),
            "content": [{"type": "text", "text": " ".join(words)}],
            "stop_reason": _stop_reason(body, words), "stop_sequence": None, "usage": _usage(len(words))}


def events(body: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The Messages API's stream of events answering `body`: (event name, data)."""
    words = answer_words(body)
    started = {**message(body), "content": [], "stop_reason": None, "usage": _usage(1)}
    yield "message_start", {"type": "message_start", "message": started}
    yield "content_block_start", {"type": "content_block_start", "index": 0,
                                  "content_block": {"type": "text", "text": ""}}
    yield "ping", {"type": "ping"}
    for position, word in enumerate(words):
        piece = word if position == 0 else " " + word
        yield "content_block_delta", {"type": "content_block_delta", "index": 0,
                                      "delta": {"type": "text_delta", "text": piece}}
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": _stop_reason(body, words), "stop_sequence": None},
                            "usage": {"output_tokens": len(words)}}
    yield "message_stop", {"type": "message_stop"}


class AnthropicServer:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._failures: list[int] = []
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

    def _take_failure(self) -> int | None:
        with self._lock:
            return self._failures.pop(0) if self._failures else None

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
            self.send_header("request-id", f"req_{server.count:024d}")
            for name, value in (extra or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str, extra: dict[str, str] | None = None) -> None:
            kind = ERROR_TYPES.get(status, "api_error")
            self._send(status, {"type": "error", "error": {"type": kind, "message": message}}, extra)

        def do_POST(self) -> None:
            raw = self.read_body()
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            server._note(Received("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            failure = server._take_failure()
            if failure is not None:
                self._error(failure, "try again", {"retry-after": "0", "x-should-retry": "false"})
                return
            if self.path.partition("?")[0] != "/v1/messages":
                self._error(404, f"Not found: {self.path.partition('?')[0]}")
                return
            if not isinstance(body, dict) or not isinstance(body.get("max_tokens"), int):
                self._error(400, "max_tokens: Field required")
                return
            if not body.get("stream"):
                self._send(200, message(body))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("request-id", f"req_{server.count:024d}")
            self.end_headers()
            for name, data in events(body):
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
