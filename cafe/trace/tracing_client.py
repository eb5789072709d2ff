"""Wraps any client so that each `chat` becomes one generation span."""

from __future__ import annotations

from typing import Any

from cafe.clients.base import ChatClient, Message, Response
from cafe.trace.tracer import Tracer


class TracingClient:
    def __init__(self, client: ChatClient, tracer: Tracer) -> None:
        self.inner = client
        self.tracer = tracer

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def provider(self) -> str:
        return self.inner.provider

    @property
    def calls(self) -> int:
        return self.inner.calls

    def __repr__(self) -> str:
        return f"TracingClient({self.inner!r})"

    def __getattr__(self, name: str) -> Any:
        # server_address, secrets() and the like belong to the wrapped client. Without `inner`
        # (a copy being built) there is nothing to delegate to: recursing would never end.
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _endpoint(self) -> dict[str, Any]:
        """server_address / server_port of a client that talks to a network endpoint."""
        found = {}
        for key in ("server_address", "server_port"):
            value = getattr(self.inner, key, None)
            if value is not None:
                found[key] = value
        return found

    def chat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        temperature: float = 0.0,
        tool_choice: Any = None,
    ) -> Response:
        with self.tracer.generation(
            f"chat {self.inner.model}",
            model=self.inner.model,
            provider=self.inner.provider,
            input=messages,
            temperature=temperature,
            tools=tools,
            **self._endpoint(),
        ) as node:
            response = self.inner.chat(messages, tools, temperature, tool_choice)
            if node.generation is not None:
                node.generation.record_response(response)
            return response
