"""A local OpenAI Responses API server for tests: `POST /v1/responses` on 127.0.0.1, answered
as the service answers it.

A plain request gets a `response` object; `"stream": true` gets the `response.*` server-sent
events in the service's order, each with its `event:` line and a `sequence_number`
(`response.created`, `response.in_progress`, then for each output item
`response.output_item.added`, its parts and deltas, `response.output_item.done`, and last
`response.completed` or `response.incomplete` carrying the whole response). The model is a
deterministic function of the request, so a replay can be compared with a live run:

- with function tools, and no tool output in the conversation since its last user message,
  it calls the first function tool (or the one `tool_choice` names; none for `"none"`), its
  arguments made from the tool's parameter schema;
- otherwise it answers a message: words derived from the last input, or, when `text.format`
  is a JSON schema, a document made from that schema;
- with `reasoning` in the request, a reasoning item (its summary) comes first;
- a `max_output_tokens` below the reply's words cuts it there (`status: incomplete`,
  `incomplete_details.reason: max_output_tokens`).

Each response is kept (unless `store` is false), so that `previous_response_id` continues
it; an id it never gave is the service's 400. `fail_next(429, 500)` answers with the
service's error bodies; `down()` answers every request 503 and counts it, so that a test
proves a replay sent none. The OpenAI Agents SDK's trace upload (`/v1/traces/ingest`) is
accepted with 204, as the service does.

    with ResponsesServer.running() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test-...")
        ...
        assert server.count == 1
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.wire.openai_server import Received

CREATED_AT = 1_700_000_000
_WORDS = ("Sure", "one", "latte", "coming", "up", "at", "table")
_ERRORS = {
    429: ("Rate limit reached for requests", "requests", "rate_limit_exceeded"),
    500: ("The server had an error while processing your request.", "server_error", "server_error"),
    503: ("The server is down.", "server_error", "service_unavailable"),
}


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def value_for(schema: Any, defs: dict[str, Any] | None = None) -> Any:
    """A value that `schema` (a JSON schema, as strict function tools and structured outputs
    send it) accepts: every property of an object, one item of an array."""
    if not isinstance(schema, dict):
        return "latte"
    defs = {**(defs or {}), **schema.get("$defs", {}), **schema.get("definitions", {})}
    if isinstance(schema.get("$ref"), str):
        return value_for(defs.get(schema["$ref"].rsplit("/", 1)[-1], {}), defs)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        choices = [choice for choice in schema.get(key, []) if not (isinstance(choice, dict)
                                                                    and choice.get("type") == "null")]
        if choices:
            return value_for(choices[0], defs)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        return {name: value_for(child, defs) for name, child in schema.get("properties", {}).items()}
    if kind == "array":
        return [value_for(schema.get("items", {}), defs)]
    if kind == "integer":
        return 2
    if kind == "number":
        return 1.5
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return "latte"


def _input_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    given = body.get("input")
    if isinstance(given, str):
        return [{"type": "message", "role": "user", "content": given}]
    return [item for item in given or [] if isinstance(item, dict)]


def _last_text(items: list[dict[str, Any]]) -> str:
    for item in reversed(items):
        content = item.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        if item.get("type") == "function_call_output":
            return str(item.get("output"))
    return ""


def _answered_tools(items: list[dict[str, Any]]) -> bool:
    """Whether a tool's output came after the conversation's last user message."""
    for item in reversed(items):
        if str(item.get("type", "")).endswith("_output"):
            return True
        if item.get("role") == "user":
            return False
    return False


def _called_tool(body: dict[str, Any], items: list[dict[str, Any]]) -> dict[str, Any] | None:
    functions = [tool for tool in body.get("tools") or [] if isinstance(tool, dict) and tool.get("type") == "function"]
    choice = body.get("tool_choice")
    if not functions or choice == "none" or _answered_tools(items):
        return None
    if isinstance(choice, dict) and choice.get("type") == "function":
        named = [tool for tool in functions if tool.get("name") == choice.get("name")]
        functions = named or functions
    return functions[0]


def _usage(body: dict[str, Any], output: list[dict[str, Any]], continued: bool) -> dict[str, Any]:
    given = 12 + len(json.dumps([body.get("instructions"), body.get("input"), body.get("tools")])) // 16
    words = 0
    reasoning = 0
    for item in output:
        if item["type"] == "message":
            words += sum(len(part["text"].split()) for part in item["content"])
        elif item["type"] == "function_call":
            words += max(len(item["arguments"]) // 4, 1)
        elif item["type"] == "reasoning":
            reasoning += sum(len(part["text"].split()) for part in item["summary"])
    made = words + reasoning
    return {"input_tokens": given, "input_tokens_details": {"cached_tokens": 8 if continued else 0,
                                                            "cache_write_tokens": 0},
            "output_tokens": made, "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": given + made}


class ResponsesServer:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self.stored: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._failures: list[int] = []
        self._down = False
        self._server: ThreadingHTTPServer | None = None

    @property
    def count(self) -> int:
        """The requests received, trace uploads left out."""
        with self._lock:
            return sum(1 for received in self.received if not received.path.startswith("/v1/traces"))

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def fail_next(self, *statuses: int) -> None:
        """Answer the next requests with these statuses and the service's error bodies."""
        with self._lock:
            self._failures.extend(statuses)

    def down(self, down: bool = True) -> None:
        """Answer every request 503 (each still counted)."""
        self._down = down

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The status and the finished response (or error body) for a request's `body`."""
        with self._lock:
            failure = 503 if self._down else (self._failures.pop(0) if self._failures else None)
        if failure is not None:
            message, kind, code = _ERRORS.get(failure, ("Bad request.", "invalid_request_error", None))
            return failure, {"error": {"message": message, "type": kind, "param": None, "code": code}}
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return 400, {"error": {"message": "Missing required parameter: 'model'.", "type": "invalid_request_error",
                                   "param": "model", "code": "missing_required_parameter"}}
        previous_id = body.get("previous_response_id")
        if previous_id is not None and previous_id not in self.stored:
            return 400, {"error": {"message": f"Previous response with id '{previous_id}' not found.",
                                   "type": "invalid_request_error", "param": "previous_response_id",
                                   "code": "previous_response_not_found"}}
        response = self._response(body, previous_id is not None)
        if body.get("store", True) is not False:
            with self._lock:
                self.stored[response["id"]] = response
        return 200, response

    def _response(self, body: dict[str, Any], continued: bool) -> dict[str, Any]:
        items = _input_items(body)
        digest = _digest([body.get("input"), body.get("instructions"), body.get("previous_response_id"),
                          body.get("model"), body.get("max_output_tokens")])
        output: list[dict[str, Any]] = []
        if isinstance(body.get("reasoning"), dict):
            output.append({"id": f"rs_{digest[:16]}", "type": "reasoning",
                           "summary": [{"type": "summary_text", "text": f"The guest asks for {digest[16:22]}."}]})
        status, incomplete = "completed", None
        tool = _called_tool(body, items)
        if tool is not None:
            arguments = json.dumps(value_for(tool.get("parameters")), separators=(",", ":"))
            output.append({"id": f"fc_{digest[:16]}", "type": "function_call", "status": "completed",
                           "arguments": arguments, "call_id": f"call_{digest[22:34]}", "name": tool["name"]})
        else:
            text_format = (body.get("text") or {}).get("format") or {}
            if text_format.get("type") == "json_schema":
                said = json.dumps(value_for(text_format.get("schema")), separators=(",", ":"))
            else:
                heard = _digest([_last_text(items), body.get("max_output_tokens")])[:6]
                said = " ".join([*_WORDS, heard])
            limit = body.get("max_output_tokens")
            if isinstance(limit, int) and 0 < limit < len(said.split()):
                said = " ".join(said.split()[:limit])
                status, incomplete = "incomplete", {"reason": "max_output_tokens"}
            output.append({"id": f"msg_{digest[:16]}", "type": "message", "status": status, "role": "assistant",
                           "content": [{"type": "output_text", "text": said, "annotations": [], "logprobs": []}]})
        conversation = body.get("conversation")
        if isinstance(conversation, str):
            conversation = {"id": conversation}
        tier = body.get("service_tier")
        return {
            "id": f"resp_{digest[:24]}", "object": "response", "created_at": CREATED_AT, "status": status,
            "background": False, "completed_at": CREATED_AT + 1 if status == "completed" else None,
            "conversation": conversation, "error": None, "incomplete_details": incomplete,
            "instructions": body.get("instructions"), "max_output_tokens": body.get("max_output_tokens"),
            "max_tool_calls": None, "model": f"{body['model']}-2025-04-14", "output": output,
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": body.get("previous_response_id"), "prompt_cache_key": None,
            "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
            "safety_identifier": None, "service_tier": "default" if tier in (None, "auto") else tier,
            "store": body.get("store", True), "temperature": body.get("temperature", 1.0),
            "text": body.get("text") or {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools") or [],
            "top_logprobs": 0, "top_p": body.get("top_p", 1.0), "truncation": body.get("truncation", "disabled"),
            "usage": _usage(body, output, continued), "user": None, "metadata": body.get("metadata") or {},
        }

    @classmethod
    @contextmanager
    def running(cls) -> Iterator[ResponsesServer]:
        server = cls()
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(server))
        httpd.daemon_threads = True
        server._server = httpd
        thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), name="responses-server", daemon=True)
        thread.start()
        try:
            yield server
        finally:
            httpd.shutdown()
            httpd.server_close()
            thread.join(5)


def events(response: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The stream that delivers `response`, event by event, as the service sends it."""
    number = iter(range(1_000_000))
    opening = {**response, "status": "in_progress", "output": [], "usage": None, "completed_at": None,
               "incomplete_details": None}
    yield {"type": "response.created", "sequence_number": next(number), "response": opening}
    yield {"type": "response.in_progress", "sequence_number": next(number), "response": opening}
    for index, item in enumerate(response["output"]):
        at = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            yield {"type": "response.output_item.added", "sequence_number": next(number), "output_index": index,
                   "item": {**item, "status": "in_progress", "content": []}}
            for part_index, part in enumerate(item["content"]):
                empty = {**part, "text": ""}
                yield {"type": "response.content_part.added", "sequence_number": next(number), **at,
                       "content_index": part_index, "part": empty}
                for position, word in enumerate(part["text"].split(" ")):
                    yield {"type": "response.output_text.delta", "sequence_number": next(number), **at,
                           "content_index": part_index, "delta": word if position == 0 else " " + word,
                           "logprobs": []}
                yield {"type": "response.output_text.done", "sequence_number": next(number), **at,
                       "content_index": part_index, "text": part["text"], "logprobs": []}
                yield {"type": "response.content_part.done", "sequence_number": next(number), **at,
                       "content_index": part_index, "part": part}
        elif item["type"] == "function_call":
            yield {"type": "response.output_item.added", "sequence_number": next(number), "output_index": index,
                   "item": {**item, "status": "in_progress", "arguments": ""}}
            arguments = item["arguments"]
            for start in range(0, len(arguments), 8):
                yield {"type": "response.function_call_arguments.delta", "sequence_number": next(number), **at,
                       "delta": arguments[start:start + 8]}
            yield {"type": "response.function_call_arguments.done", "sequence_number": next(number), **at,
                   "arguments": arguments}
        elif item["type"] == "reasoning":
            yield {"type": "response.output_item.added", "sequence_number": next(number), "output_index": index,
                   "item": {**item, "summary": []}}
            for summary_index, part in enumerate(item["summary"]):
                yield {"type": "response.reasoning_summary_part.added", "sequence_number": next(number), **at,
                       "summary_index": summary_index, "part": {**part, "text": ""}}
                for position, word in enumerate(part["text"].split(" ")):
                    yield {"type": "response.reasoning_summary_text.delta", "sequence_number": next(number), **at,
                           "summary_index": summary_index, "delta": word if position == 0 else " " + word}
                yield {"type": "response.reasoning_summary_text.done", "sequence_number": next(number), **at,
                       "summary_index": summary_index, "text": part["text"]}
                yield {"type": "response.reasoning_summary_part.done", "sequence_number": next(number), **at,
                       "summary_index": summary_index, "part": part}
        yield {"type": "response.output_item.done", "sequence_number": next(number), "output_index": index,
               "item": item}
    ending = "response.completed" if response["status"] == "completed" else f"response.{response['status']}"
    yield {"type": ending, "sequence_number": next(number), "response": response}


def _handler_for(server: ResponsesServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            return None

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-request-id", f"req_{server.count}")
            if status == 429:
                self.send_header("retry-after-ms", "1")
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            server.received.append(Received("GET", self.path, {k.lower(): v for k, v in self.headers.items()}, None))
            self._send(404, {"error": {"message": "Not found.", "type": "invalid_request_error", "param": None,
                                       "code": None}})

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            with server._lock:
                server.received.append(Received("POST", self.path, {k.lower(): v for k, v in self.headers.items()},
                                                body))
            if self.path.startswith("/v1/traces/ingest"):  # the Agents SDK's traces: accepted, as the service does
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if self.path.partition("?")[0] != "/v1/responses" or not isinstance(body, dict):
                self._send(404, {"error": {"message": "Not found.", "type": "invalid_request_error", "param": None,
                                           "code": None}})
                return
            status, answer = server.answer(body)
            if status != 200 or not body.get("stream"):
                self._send(status, answer)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("x-request-id", f"req_{server.count}")
            self.end_headers()
            for event in events(answer):
                data = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
                try:
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                except OSError:  # the client closed the stream early
                    return
            try:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                pass

    return Handler
