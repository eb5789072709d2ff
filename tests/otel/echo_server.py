"""A local OpenAI-compatible server on 127.0.0.1 whose replies carry whatever a test plants
in the fields a server controls: response id, model, finish reason, tool call id, tool
name, content (which can echo the Authorization header it was sent)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[int, str], dict[str, Any]]  # (call number, Authorization header) -> body


def planted_reply(
    *, response_id: str, model: str, finish_reason: str, call_id: str, tool_name: str, text: str,
) -> Reply:
    """First call: a tool call; every later call: a text answer. `{n}` in a field is the
    call number, `{authorization}` in the text is the API key the server was sent."""

    def reply(n: int, authorization: str) -> dict[str, Any]:
        if n == 1:
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id.format(n=n), "type": "function",
                 "function": {"name": tool_name, "arguments": json.dumps({"item": "latte"})}}]}
        else:
            message = {"role": "assistant", "content": text.format(n=n, authorization=authorization)}
        return {
            "id": response_id.format(n=n), "object": "chat.completion", "created": 1_700_000_000,
            "model": model, "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
        }

    return reply


@contextmanager
def echo_server(reply: Reply, *, odd: dict[str, Any] | None = None) -> Iterator[str]:
    """Yields the base URL. `odd` is merged into every body (fields of the wrong type make
    the SDK's pydantic models warn)."""
    calls = [0]
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with lock:
                calls[0] += 1
                n = calls[0]
            key = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
            body = {**reply(n, key), **(odd or {})}
            data = json.dumps(body).encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
