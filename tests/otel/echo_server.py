"""A local OpenAI-compatible server on 127.0.0.1 whose replies carry whatever a test plants
in the fields a server controls: response id, model, finish reason, tool call id, tool
name, content (which can echo the Authorization header it was sent)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tests.local_http import QuietHandler, serving

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

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            self.read_body()
            with lock:
                calls[0] += 1
                n = calls[0]
            key = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
            self.answer(200, json.dumps({**reply(n, key), **(odd or {})}).encode("utf-8"))

    with serving(Handler) as port:
        yield f"http://127.0.0.1:{port}/v1"
