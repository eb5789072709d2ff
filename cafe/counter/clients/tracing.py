"""Wraps any client so that each `chat` becomes one generation span."""

from __future__ import annotations

from typing import Any

from cafe.counter.clients.base import ChatClient, Message, Response, endpoint_of
from cafe.counter.clients.wrapper import WrappedClient
from cafe.trace.tracer import Tracer


class TracingClient(WrappedClient):
    def __init__(self, client: ChatClient, tracer: Tracer) -> None:
        super().__init__(client)
        self.tracer = tracer
        self._found_endpoint: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"TracingClient({self.inner!r})"

    def _endpoint(self) -> dict[str, Any]:
        """server_address / server_port of a client that talks to a network endpoint. Looked
        up once: a client's endpoint does not move, and a missing attribute costs an
        exception through every wrapper on each call."""
        if self._found_endpoint is None:
            address, port = endpoint_of(self.inner)
            found = {"server_address": address, "server_port": port}
            self._found_endpoint = {key: value for key, value in found.items() if value is not None}
        return self._found_endpoint

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
        ) as call:
            response = self.inner.chat(messages, tools, temperature, tool_choice)
            call.record_response(response)
            return response
