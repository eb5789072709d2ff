"""An offline model that plays back a fixed list of assistant messages, for shifts whose
model behaviour is part of the test (consent paths, repairs, duplicates)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cafe.counter.clients.base import Message, Response, ToolCallIdCheck, make_response
from cafe.errors import CafeError

CANNED_USAGE = (40, 8)


class CannedRepliesExhausted(CafeError):
    def __init__(self, count: int) -> None:
        super().__init__(f"the canned client had {count} replies and was asked for one more")


class CannedClient:
    provider = "cafe.canned"

    def __init__(self, replies: Sequence[Message], *, model: str = "canned-barista-1") -> None:
        self._replies = [dict(reply) for reply in replies]
        self.model = model
        self.calls = 0
        self._check_tool_call_ids = ToolCallIdCheck()  # each message once, when first sent

    def __repr__(self) -> str:
        return f"CannedClient(model={self.model!r}, replies={len(self._replies)}, calls={self.calls})"

    def chat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        temperature: float = 0.0,
        tool_choice: Any = None,
    ) -> Response:
        self._check_tool_call_ids(messages)
        if self.calls >= len(self._replies):
            raise CannedRepliesExhausted(len(self._replies))
        reply = {"role": "assistant", **self._replies[self.calls]}
        self.calls += 1
        return make_response(
            reply, model=self.model, response_id=f"canned-{self.calls}", usage=CANNED_USAGE
        )
