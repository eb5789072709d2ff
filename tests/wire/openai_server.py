"""A local OpenAI-compatible server for tests: `/v1/chat/completions` on 127.0.0.1.

It answers plain JSON, or server-sent events when the request says `"stream": true` (with a
usage chunk when `stream_options.include_usage` is true), counts the requests it receives,
and can be told to fail the next requests (429, 500), to wait before answering, or to hold
every answer until a number of requests are in (so that calls sent together are in flight
together). A trace upload (`/v1/traces/ingest`, the OpenAI Agents SDK's) is accepted with
204 No Content, as the service accepts it.

    with OpenAIServer.running() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test-...")
        ...
        assert server.count == 1

The answer is a deterministic function of the request (its last message and `max_tokens`),
so a changed request gets a changed answer and a replay can be compared with a live run.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None


@dataclass
class _Plan:
    failures: list[int] = field(default_factory=list)
    delay_s: float = 0.0
    chunk_pause_s: float = 0.0
    hold_until: int = 0
    hold_s: float = 0.0


def answer_text(body: dict[str, Any]) -> str:
    """The reply the server gives to `body`: words derived from its last message."""
    messages = body.get("messages") or [{}]
    last = messages[-1].get("content") if isinstance(messages[-1], dict) else None
    digest = hashlib.sha256(json.dumps([last, body.get("max_tokens")]).encode()).hexdigest()
    words = ["Sure", "one", "latte", "coming", "up", "at", "table", digest[:6]]
    limit = body.get("max_tokens")
    if isinstance(limit, int) and limit > 0:
        words = words[: max(1, min(len(words), limit))]
    return " ".join(words)


def completion_id(body: dict[str, Any]) -> str:
    return "chatcmpl-" + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]


class OpenAIServer:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._plan = _Plan()
        self._server: ThreadingHTTPServer | None = None

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.received)

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def fail_next(self, *statuses: int) -> None:
        """Answer the next requests with these statuses (429 and 500 carry an error body)."""
        with self._lock:
            self._plan.failures.extend(statuses)

    def delay(self, seconds: float) -> None:
        """Wait this long before each answer."""
        self._plan.delay_s = seconds

    def pause_between_chunks(self, seconds: float) -> None:
        self._plan.chunk_pause_s = seconds

    def hold_answers_until(self, count: int, at_most_s: float = 60.0) -> None:
        """Answer nothing until `count` requests have been received in all (or `at_most_s`
        has passed): requests sent together are then all in flight together."""
        self._plan.hold_until, self._plan.hold_s = count, at_most_s

    def _hold(self) -> None:
        with self._arrived:
            self._arrived.notify_all()
            self._arrived.wait_for(lambda: len(self.received) >= self._plan.hold_until, self._plan.hold_s)

    def _take_failure(self) -> int | None:
        with self._lock:
            return self._plan.failures.pop(0) if self._plan.failures else None

    def _note(self, received: Received) -> None:
        with self._lock:
            self.received.append(received)

    @classmethod
    @contextmanager
    def running(cls) -> Iterator[OpenAIServer]:
        server = cls()
        with server.serving():
            yield server

    @contextmanager
    def serving(self) -> Iterator[OpenAIServer]:
        httpd = _Listener(("127.0.0.1", 0), _handler_for(self))
        httpd.daemon_threads = True
        self._server = httpd
        thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), name="openai-server", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            httpd.shutdown()
            httpd.server_close()
            thread.join(5)


class _Listener(ThreadingHTTPServer):
    # Room for the connections of many calls sent at once (the default backlog is 5).
    request_queue_size = 256


def _completion(body: dict[str, Any]) -> dict[str, Any]:
    text = answer_text(body)
    return {
        "id": completion_id(body), "object": "chat.completion", "created": 1_700_000_000,
        "model": body.get("model", "test-model"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop",
                     "logprobs": None}],
        "usage": {"prompt_tokens": 11, "completion_tokens": len(text.split()), "total_tokens": 11 + len(text.split())},
    }


def _events(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    text = answer_text(body)
    base = {"id": completion_id(body), "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": body.get("model", "test-model")}
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    usage_field: dict[str, Any] = {"usage": None} if include_usage else {}
    yield {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                "finish_reason": None}], **usage_field}
    for position, word in enumerate(text.split()):
        piece = word if position == 0 else " " + word
        yield {**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}], **usage_field}
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], **usage_field}
    if include_usage:
        words = len(text.split())
        yield {**base, "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": words,
                                                "total_tokens": 11 + words}}


def _handler_for(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            return None

        def _send(self, status: int, payload: dict[str, Any], extra: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-request-id", f"req-{server.count}")
            for name, value in (extra or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            server._note(Received("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            if self.path.startswith("/v1/traces/ingest"):  # the Agents SDK's traces: accepted, as the service does
                self.send_response(204)
                self.end_headers()
                return
            if server._plan.hold_until:
                server._hold()
            if server._plan.delay_s:
                time.sleep(server._plan.delay_s)
            failure = server._take_failure()
            if failure is not None:
                kind = "rate_limit_exceeded" if failure == 429 else "server_error"
                self._send(failure, {"error": {"message": "try again", "type": kind, "code": kind}},
                           {"retry-after-ms": "1", "x-should-retry": "false"})
                return
            if not self.path.startswith("/v1/chat/completions") or not isinstance(body, dict):
                self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
                return
            if not body.get("stream"):
                self._send(200, _completion(body))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("x-request-id", f"req-{server.count}")
            self.end_headers()
            for event in _events(body):
                self._chunk(b"data: " + json.dumps(event).encode() + b"\n\n")
                if server._plan.chunk_pause_s:
                    time.sleep(server._plan.chunk_pause_s)
            self._chunk(b"data: [DONE]\n\n")
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
