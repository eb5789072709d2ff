"""A local OpenAI-compatible server for tests: `/v1/chat/completions` on 127.0.0.1 (and at
`/openai/v1/chat/completions`, where Groq's SDK sends it).

It answers plain JSON, or server-sent events when the request says `"stream": true` (with a
usage chunk when `stream_options.include_usage` is true), counts the requests it receives,
and can be told to fail the next requests (429, 500), to wait before answering, or to hold
every answer until a number of requests are in (so that calls sent together are in flight
together). Besides chat completions it answers the Responses API (`/v1/responses`),
Anthropic's Messages API (`/v1/messages`), embeddings (`/v1/embeddings`: float or base64,
`dimensions`), audio transcriptions (a multipart upload) and speech (a binary answer), and
accepts a trace upload (`/v1/traces/ingest`, the OpenAI
Agents SDK's) with 204 No Content, as the service does; it can be told what to say and how
to cut a stream (`answer_with`, `split_events`), to encode its answers (`encode_answers`) and
to require a key in the query (`require_query`).

    with OpenAIServer.running() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test-...")
        ...
        assert server.count == 1

The answer is a deterministic function of the request (its last message and `max_tokens`),
so a changed request gets a changed answer and a replay can be compared with a live run.
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import gzip
import hashlib
import json
import struct
import threading
import time
import urllib.parse
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

EMBEDDING_DIMENSIONS = 1536  # an embedding's length when the request does not ask for fewer


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None


@dataclass
class _Plan:
    failures: list[int] = field(default_factory=list)
    retryable: bool = False  # a failure's `x-should-retry`: whether the SDK retries it
    head: dict[str, Any] = field(default_factory=dict)  # fields every chat answer (and chunk) adds
    delay_s: float = 0.0
    chunk_pause_s: float = 0.0
    hold_until: int = 0
    hold_s: float = 0.0
    answer: str | None = None  # the reply, instead of `answer_text`'s
    token_chars: int = 0  # a stream's text deltas this many characters each (0: a word each)
    tool_arguments: str | None = None  # a streamed chat reply calls a tool with these arguments
    event_pieces: int = 1  # each event of a stream written (and flushed) in this many pieces
    content_encoding: str | None = None
    required_query: tuple[str, str] | None = None
    speech: bytes = b"ID3\x03\x00\x00\x00\x00\x00\x00\xff\xfb\x90\x00"


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

    def fail_next(self, *statuses: int, retryable: bool = False) -> None:
        """Answer the next requests with these statuses (429 and 500 carry an error body),
        each saying `x-should-retry: false`, or with `retryable`, `true` (the SDK then retries
        it, after the 1 ms its `retry-after-ms` asks)."""
        with self._lock:
            self._plan.failures.extend(statuses)
            self._plan.retryable = retryable

    def answer_head(self, **fields: Any) -> None:
        """Fields every chat completion and chunk carries besides its own
        (`system_fingerprint`, `service_tier`)."""
        self._plan.head = dict(fields)

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

    def answer_with(self, text: str, *, token_chars: int = 0, tool_arguments: str | None = None) -> None:
        """Say `text` (streamed `token_chars` characters an event, or a word an event), and
        in a streamed chat reply, call a tool `note` with `tool_arguments` (in pieces as well)."""
        self._plan.answer, self._plan.token_chars, self._plan.tool_arguments = text, token_chars, tool_arguments

    def split_events(self, pieces: int) -> None:
        """Write each event of a stream in `pieces` flushed pieces, so that a client reads it
        in several (with `pause_between_chunks`, a pause after each piece)."""
        self._plan.event_pieces = pieces

    def encode_answers(self, encoding: str | None) -> None:
        """Send answers with this `content-encoding`: gzip and deflate (one or several, in
        order) are applied; any other is only named, the body sent as it is."""
        self._plan.content_encoding = encoding

    def require_query(self, name: str, value: str) -> None:
        """Answer 401 unless the query holds `name=value` (a key in the query, as Azure's)."""
        self._plan.required_query = (name, value)

    def speak(self, audio: bytes) -> None:
        """The bytes `/v1/audio/speech` answers with."""
        self._plan.speech = audio

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


def _completion(body: dict[str, Any], head: dict[str, Any] | None = None) -> dict[str, Any]:
    text = answer_text(body)
    return {
        "id": completion_id(body), "object": "chat.completion", "created": 1_700_000_000,
        "model": body.get("model", "test-model"), **(head or {}),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop",
                     "logprobs": None}],
        "usage": {"prompt_tokens": 11, "completion_tokens": len(text.split()), "total_tokens": 11 + len(text.split())},
    }


def _said(body: dict[str, Any], plan: _Plan) -> str:
    return plan.answer if plan.answer is not None else answer_text(body)


def _deltas(text: str, plan: _Plan) -> list[str]:
    if plan.token_chars:
        return [text[at:at + plan.token_chars] for at in range(0, len(text), plan.token_chars)]
    return [word if position == 0 else " " + word for position, word in enumerate(text.split())]


def _encoded(data: bytes, encoding: str | None) -> bytes:
    for name in (encoding or "").split(","):
        name = name.strip().lower()
        if name in ("gzip", "x-gzip"):
            data = gzip.compress(data)
        elif name == "deflate":
            data = zlib.compress(data)
    return data


def _response_object(body: dict[str, Any], text: str, status: str) -> dict[str, Any]:
    return {"id": "resp_" + completion_id(body)[9:], "object": "response", "created_at": 1_700_000_000,
            "model": body.get("model", "test-model"), "status": status, "parallel_tool_calls": False,
            "tool_choice": "auto", "tools": [],
            "output": [{"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]}] if text else [],
            "usage": {"input_tokens": 11, "output_tokens": len(text.split()), "total_tokens": 11 + len(text.split()),
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}


def _response_events(body: dict[str, Any], plan: _Plan) -> Iterator[tuple[str, dict[str, Any]]]:
    """The Responses API's stream: the text as `response.output_text.delta` events, and the
    tool call's arguments as `response.function_call_arguments.delta` events."""
    text = _said(body, plan)
    number = iter(range(1_000_000))
    yield "response.created", {"type": "response.created", "sequence_number": next(number),
                               "response": _response_object(body, "", "in_progress")}
    for piece in _deltas(text, plan):
        yield "response.output_text.delta", {"type": "response.output_text.delta", "item_id": "msg_1",
                                             "output_index": 0, "content_index": 0, "delta": piece, "logprobs": [],
                                             "sequence_number": next(number)}
    if plan.tool_arguments is not None:
        for piece in _deltas(plan.tool_arguments, plan):
            yield "response.function_call_arguments.delta", {
                "type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 1,
                "delta": piece, "sequence_number": next(number)}
    yield "response.completed", {"type": "response.completed", "sequence_number": next(number),
                                 "response": _response_object(body, "[see the deltas]", "completed")}


def _message_events(body: dict[str, Any], plan: _Plan) -> Iterator[tuple[str, dict[str, Any]]]:
    """Anthropic's Messages stream: `text_delta`s in block 0, `input_json_delta`s in block 1."""
    text = _said(body, plan)
    yield "message_start", {"type": "message_start", "message": {
        "id": "msg_01", "type": "message", "role": "assistant", "model": body.get("model", "test-model"),
        "content": [], "stop_reason": None, "usage": {"input_tokens": 11, "output_tokens": 1}}}
    yield "content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text",
                                                                                                 "text": ""}}
    for piece in _deltas(text, plan):
        yield "content_block_delta", {"type": "content_block_delta", "index": 0,
                                      "delta": {"type": "text_delta", "text": piece}}
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    if plan.tool_arguments is not None:
        yield "content_block_start", {"type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": "toolu_01", "name": "note", "input": {}}}
        for piece in _deltas(plan.tool_arguments, plan):
            yield "content_block_delta", {"type": "content_block_delta", "index": 1,
                                          "delta": {"type": "input_json_delta", "partial_json": piece}}
        yield "content_block_stop", {"type": "content_block_stop", "index": 1}
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                            "usage": {"output_tokens": len(text.split())}}
    yield "message_stop", {"type": "message_stop"}


def _embedding(item: Any, size: int) -> list[float]:
    """A unit-scale vector of `size` values, a deterministic function of the input."""
    seed = hashlib.sha256(json.dumps(item).encode()).digest()
    return [round((seed[n % len(seed)] * (n + 1) % 251) / 125.0 - 1.0, 6) for n in range(size)]


def _embeddings(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The Embeddings API's answer to `body` (status, body): a vector an input, floats or
    base64 float32 bytes (`encoding_format`), `dimensions` long (1536 by default), and the
    input's tokens (a word a token, or a token array's length) as its usage."""
    given = body.get("input")
    if isinstance(given, str) or (isinstance(given, list) and given and all(type(n) is int for n in given)):
        inputs = [given]
    elif isinstance(given, list) and given:
        inputs = given
    else:
        return 400, {"error": {"message": "'input' is a required property", "type": "invalid_request_error",
                               "param": "input", "code": None}}
    size = body.get("dimensions", EMBEDDING_DIMENSIONS)
    if type(size) is not int or not 1 <= size <= EMBEDDING_DIMENSIONS:
        return 400, {"error": {"message": f"Invalid value for 'dimensions' = {size}.",
                               "type": "invalid_request_error", "param": "dimensions", "code": None}}
    encoding = body.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        return 400, {"error": {"message": f"Invalid value for 'encoding_format' = {encoding}.",
                               "type": "invalid_request_error", "param": "encoding_format", "code": None}}
    data = []
    for index, item in enumerate(inputs):
        vector: Any = _embedding(item, size)
        if encoding == "base64":
            vector = base64.b64encode(struct.pack(f"<{size}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": vector})
    tokens = sum(len(item) if isinstance(item, list) else len(str(item).split()) for item in inputs)
    return 200, {"object": "list", "data": data, "model": body.get("model", "text-embedding-3-small"),
                 "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def _form(headers: Any, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    """A multipart/form-data body's fields: name -> (filename, content)."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + str(headers.get("Content-Type", "")).encode("latin-1") + b"\r\n\r\n" + raw)
    fields = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        content = part.get_payload(decode=True)
        fields[str(name)] = (part.get_filename(), content if isinstance(content, bytes) else b"")
    return fields


def _events(body: dict[str, Any], plan: _Plan | None = None) -> Iterator[dict[str, Any]]:
    plan = plan or _Plan()
    text = _said(body, plan)
    base = {"id": completion_id(body), "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": body.get("model", "test-model"), **plan.head}
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    usage_field: dict[str, Any] = {"usage": None} if include_usage else {}
    yield {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                "finish_reason": None}], **usage_field}
    for piece in _deltas(text, plan):
        yield {**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}], **usage_field}
    if plan.tool_arguments is not None:
        yield {**base, "choices": [{"index": 0, "delta": {"tool_calls": [{
            "index": 0, "id": "call_1", "type": "function", "function": {"name": "note", "arguments": ""}}]},
            "finish_reason": None}], **usage_field}
        for piece in _deltas(plan.tool_arguments, plan):
            yield {**base, "choices": [{"index": 0, "delta": {"tool_calls": [{
                "index": 0, "function": {"arguments": piece}}]}, "finish_reason": None}], **usage_field}
    finish = "stop" if plan.tool_arguments is None else "tool_calls"
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], **usage_field}
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
            self._send_bytes(status, json.dumps(payload).encode(), "application/json", extra)

        def _send_bytes(self, status: int, data: bytes, content_type: str,
                        extra: dict[str, str] | None = None) -> None:
            encoding = server._plan.content_encoding
            data = _encoded(data, encoding)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            if encoding:
                self.send_header("Content-Encoding", encoding)
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
            if self.path.startswith("/openai/v1/"):  # Groq's OpenAI-compatible routes: the same API
                self.path = self.path[len("/openai"):]
            if self.path.startswith("/v1/traces/ingest"):  # the Agents SDK's traces: accepted, as the service does
                self.send_response(204)
                self.end_headers()
                return
            if server._plan.hold_until:
                server._hold()
            path, _, query = self.path.partition("?")
            required = server._plan.required_query
            if required is not None and required not in urllib.parse.parse_qsl(query):
                self._send(401, {"error": {"message": "no key in the query", "type": "invalid_request_error"}})
                return
            if path == "/v1/audio/transcriptions":
                fields = _form(self.headers, raw)
                heard = hashlib.sha256(fields.get("file", (None, b""))[1]).hexdigest()[:8]
                prompt = fields.get("prompt", (None, b""))[1].decode("utf-8", "replace")
                self._send(200, {"text": f"heard {heard}" + (f" after {prompt}" if prompt else "")})
                return
            if path == "/v1/audio/speech":
                self._send_bytes(200, server._plan.speech, "audio/mpeg")
                return
            if path in ("/v1/responses", "/v1/messages") and isinstance(body, dict):
                if body.get("stream"):
                    events = _response_events if path == "/v1/responses" else _message_events
                    self._stream((b"event: " + name.encode() + b"\ndata: " + json.dumps(event).encode() + b"\n\n"
                                  for name, event in events(body, server._plan)), done=False)
                    return
                text = _said(body, server._plan)
                if path == "/v1/responses":
                    self._send(200, _response_object(body, text, "completed"))
                else:
                    self._send(200, {"id": "msg_01", "type": "message", "role": "assistant",
                                     "model": body.get("model", "test-model"), "stop_reason": "end_turn",
                                     "content": [{"type": "text", "text": text}],
                                     "usage": {"input_tokens": 11, "output_tokens": len(text.split())}})
                return
            if server._plan.delay_s:
                time.sleep(server._plan.delay_s)
            failure = server._take_failure()
            if failure is not None:
                kind = "rate_limit_exceeded" if failure == 429 else "server_error"
                self._send(failure, {"error": {"message": "try again", "type": kind, "code": kind}},
                           {"retry-after-ms": "1", "x-should-retry": "true" if server._plan.retryable else "false"})
                return
            if path == "/v1/embeddings" and isinstance(body, dict):
                self._send(*_embeddings(body))
                return
            if not self.path.startswith("/v1/chat/completions") or not isinstance(body, dict):
                self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
                return
            if not body.get("stream"):
                completion = _completion(body, server._plan.head)
                if server._plan.answer is not None:
                    completion["choices"][0]["message"]["content"] = server._plan.answer
                self._send(200, completion)
                return
            self._stream(b"data: " + json.dumps(event).encode() + b"\n\n" for event in _events(body, server._plan))

        def _stream(self, events: Iterator[bytes], *, done: bool = True) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("x-request-id", f"req-{server.count}")
            self.end_headers()
            pieces = max(server._plan.event_pieces, 1)
            for event in [*events, *([b"data: [DONE]\n\n"] if done else [])]:
                size = -(-len(event) // pieces)
                for at in range(0, len(event), size):
                    self._chunk(event[at:at + size])
                    if server._plan.chunk_pause_s:
                        time.sleep(server._plan.chunk_pause_s)
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
