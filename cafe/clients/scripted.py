"""The offline model: deterministic, no network, the default everywhere.

It answers a tool result with a short closing line, a customer line that names menu items
with one price_check call per item, a later line that names nothing with a goodbye, and a
first one that names nothing by asking what the customer wants.
"""

from __future__ import annotations

import json
from typing import Any

from cafe.clients.base import (
    Message,
    Response,
    ToolCallIdCheck,
    make_response,
    tool_call,
)
from cafe.menu import items_named_in
from cafe.tools import PRICE_CHECK

SCRIPTED_MODEL = "scripted-barista-1"
SCRIPTED_PROVIDER = "cafe.scripted"
# Fixed, small usage blocks keep token arithmetic checkable by hand.
TOOL_TURN_USAGE = (60, 12)
TEXT_TURN_USAGE = (80, 9)


class ScriptedClient:
    model = SCRIPTED_MODEL
    provider = SCRIPTED_PROVIDER

    def __init__(self) -> None:
        self.calls = 0
        self._check_tool_call_ids = ToolCallIdCheck()  # each message once, when first sent

    def __repr__(self) -> str:
        return f"ScriptedClient(model={self.model!r}, calls={self.calls})"

    def chat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        temperature: float = 0.0,
        tool_choice: Any = None,
    ) -> Response:
        self._check_tool_call_ids(messages)
        self.calls += 1
        message, usage = self._reply(messages)
        return make_response(
            message, model=self.model, response_id=f"scripted-{self.calls}", usage=usage
        )

    def _reply(self, messages: list[Message]) -> tuple[Message, tuple[int, int]]:
        last = messages[-1] if messages else {}
        if last.get("role") == "tool":
            return {"role": "assistant", "content": "Noted. Anything else for you?"}, TEXT_TURN_USAGE
        named = items_named_in(str(last.get("content") or "")) if last.get("role") == "user" else []
        if named:
            calls = [
                tool_call(f"call_{self.calls}_{index}", PRICE_CHECK, json.dumps({"item": item}))
                for index, item in enumerate(named, start=1)
            ]
            return {"role": "assistant", "content": None, "tool_calls": calls}, TOOL_TURN_USAGE
        if last.get("role") == "user" and self._check_tool_call_ids.opened_any:
            # A line naming nothing, after the order was priced (a tool call made earlier in
            # the conversation, known from the check without reading it again): the customer
            # is done.
            return {"role": "assistant", "content": "Thank you, enjoy your visit!"}, TEXT_TURN_USAGE
        return {"role": "assistant", "content": "What can I get you today?"}, TEXT_TURN_USAGE
