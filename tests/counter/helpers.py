"""Small builders shared by the café tests: scripted assistant replies, and a local
OpenAI-compatible chat-completions server for the live client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cafe.counter import ScriptedClient, make_responder
from tests.local_http import QuietHandler, serving


@contextmanager
def hypothesis_home(directory: Path) -> Iterator[None]:
    """Point Hypothesis's cache directory (./.hypothesis by default) at `directory` for a while."""
    from hypothesis import configuration

    previous = getattr(configuration, "__hypothesis_home_directory", None)
    configuration.set_hypothesis_home_dir(directory)
    try:
        yield
    finally:
        configuration.set_hypothesis_home_dir(previous)


def call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    """One tool call; dict arguments are JSON-encoded, strings are sent as they are."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


def calls(*tool_calls: dict[str, Any]) -> dict[str, Any]:
    """An assistant reply made of tool calls only."""
    return {"content": None, "tool_calls": list(tool_calls)}


def say(text: str) -> dict[str, Any]:
    return {"content": text}


def approve_once():
    return make_responder([("approve", None)])


def tool_results(run: Any) -> dict[str, dict[str, Any]]:
    """The shift's tool messages, decoded, by tool_call_id."""
    return {m["tool_call_id"]: json.loads(m["content"]) for m in run.messages if m["role"] == "tool"}


@dataclass
class ChatServer:
    """State of the local test server: what it must answer and what it saw."""

    api_key: str
    mode: str = "ok"  # ok | 401 | 500 | no_choices
    model_name: str = "local-test-model"
    requests: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)
    port: int = 0
    _brain: ScriptedClient = field(default_factory=ScriptedClient)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def answer(self, path: str, authorization: str | None, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.requests.append(body)
        self.authorizations.append(authorization)
        if path != "/v1/chat/completions":
            return 404, {"error": {"message": f"no route {path}", "type": "not_found"}}
        if self.mode == "no_choices":
            return 200, {"id": "x", "object": "chat.completion", "created": 0, "model": self.model_name,
                         "choices": []}
        if self.mode == "500":
            # A careless server that echoes the credentials it was sent.
            return 500, {"error": {"message": f"internal error for {authorization}", "type": "server_error"}}
        if self.mode == "401" or authorization != f"Bearer {self.api_key}":
            return 401, {
                "error": {
                    "message": f"Incorrect API key provided: {authorization}",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            }
        reply = self._brain.chat(body["messages"], body.get("tools"), body.get("temperature", 0.0))
        reply.update({"object": "chat.completion", "created": 1_700_000_000, "model": self.model_name})
        return 200, reply


@contextmanager
def chat_server(api_key: str, **options: Any) -> Iterator[ChatServer]:
    state = ChatServer(api_key=api_key, **options)

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            body = json.loads(self.read_body() or b"{}")
            status, payload = state.answer(self.path, self.headers.get("Authorization"), body)
            self.answer(status, json.dumps(payload).encode("utf-8"))

    with serving(Handler, name="chat-test-server") as port:
        state.port = port
        yield state
