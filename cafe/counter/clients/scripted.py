"""The offline model: deterministic, no network, the default everywhere.

It plays the counter the way the shift rules ask, in the fewest steps: a customer line that
names menu items gets one price_check call per item; a later line that names nothing, once
something is priced, gets the priced items proposed as an order (for the table the customer
named, else the counter's table 1); an approved proposal is fired with exactly the approved
items and table, and the fired ticket is announced. A rejected proposal is left unsent; a
line that names nothing with nothing left to propose is a goodbye, or, before anything was
asked, a question.

Its replies depend only on the conversation, read once a message: the notes it keeps are
rebuilt from the whole list whenever it is handed another list than the one it last read.
"""

from __future__ import annotations

import json
import re
from typing import Any

from cafe.counter.clients.base import (
    Message,
    Response,
    ToolCallIdCheck,
    make_response,
    tool_call,
)
from cafe.counter.menu import items_named_in
from cafe.counter.tools import FIRE_TICKET, PRICE_CHECK, PROPOSE_ORDER

SCRIPTED_MODEL = "scripted-barista-1"
SCRIPTED_PROVIDER = "cafe.scripted"
# Fixed, small usage blocks keep token arithmetic checkable by hand.
TOOL_TURN_USAGE = (60, 12)
TEXT_TURN_USAGE = (80, 9)
# The table an order goes to when the customer names none: they ordered at the counter.
COUNTER_TABLE = 1

_TABLE = re.compile(r"\btable\s+(\d{1,2})\b", re.IGNORECASE)


def _result(message: Message) -> dict[str, Any]:
    try:
        result = json.loads(str(message.get("content") or "{}"))
    except ValueError:
        return {}
    return result if isinstance(result, dict) else {}


class _OrderNotes:
    """What the scripted model remembers of a conversation, kept up to date one new message
    at a time: the items priced since the last proposal, the last table the customer named,
    and the results of the tool calls that ended the conversation so far."""

    __slots__ = ("batch", "names", "pending", "table")

    def __init__(self) -> None:
        self.names: dict[str, str] = {}  # tool call id -> tool name
        self.pending: list[str] = []
        self.table: int | None = None
        self.batch: list[tuple[str, dict[str, Any]]] = []  # (tool name, result)

    def read(self, messages: list[Message], start: int) -> None:
        for index in range(start, len(messages)):
            message = messages[index]
            role = message.get("role")
            if role == "tool":
                name = self.names.get(str(message.get("tool_call_id")), "")
                result = _result(message)
                self.batch.append((name, result))
                if name == PRICE_CHECK and result.get("available") is True and result.get("item"):
                    self.pending.append(str(result["item"]))
                elif name == PROPOSE_ORDER:
                    self.pending = []
                continue
            self.batch = []
            if role == "assistant":
                for call in message.get("tool_calls") or ():
                    function = call.get("function") or {}
                    self.names[str(call.get("id"))] = str(function.get("name"))
            elif role == "user":
                named = _TABLE.findall(str(message.get("content") or ""))
                if named:
                    self.table = int(named[-1])


class ScriptedClient:
    model = SCRIPTED_MODEL
    provider = SCRIPTED_PROVIDER

    def __init__(self) -> None:
        self.calls = 0
        self._check_tool_call_ids = ToolCallIdCheck()  # each message once, when first sent
        self._notes = _OrderNotes()

    def __repr__(self) -> str:
        return f"ScriptedClient(model={self.model!r}, calls={self.calls})"

    def chat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        temperature: float = 0.0,
        tool_choice: Any = None,
    ) -> Response:
        start = self._check_tool_call_ids(messages)
        if start == 0:
            self._notes = _OrderNotes()
        self._notes.read(messages, start)
        self.calls += 1
        message = self._reply(messages)
        usage = TOOL_TURN_USAGE if message.get("tool_calls") else TEXT_TURN_USAGE
        return make_response(
            message, model=self.model, response_id=f"scripted-{self.calls}", usage=usage
        )

    def _calls(self, name: str, arguments: list[dict[str, Any]]) -> Message:
        calls = [
            tool_call(f"call_{self.calls}_{index}", name, json.dumps(each))
            for index, each in enumerate(arguments, start=1)
        ]
        return {"role": "assistant", "content": None, "tool_calls": calls}

    def _reply(self, messages: list[Message]) -> Message:
        last = messages[-1] if messages else {}
        if last.get("role") == "tool":
            return self._after_tools()
        named = items_named_in(str(last.get("content") or "")) if last.get("role") == "user" else []
        if named:
            return self._calls(PRICE_CHECK, [{"item": item} for item in named])
        notes = self._notes
        if last.get("role") == "user" and notes.pending:
            table = notes.table if notes.table is not None else COUNTER_TABLE
            return self._calls(PROPOSE_ORDER, [{"items": list(notes.pending), "table": table}])
        if last.get("role") == "user" and self._check_tool_call_ids.opened_any:
            return {"role": "assistant", "content": "Thank you, enjoy your visit!"}
        return {"role": "assistant", "content": "What can I get you today?"}

    def _after_tools(self) -> Message:
        results = dict(self._notes.batch)
        if FIRE_TICKET in results:
            fired = results[FIRE_TICKET]
            if fired.get("status") == "fired":
                text = f"Ticket {fired.get('ticket_number')} is with the kitchen. Thank you, enjoy your visit!"
            else:
                text = "I could not send that order; let me fetch a colleague."
            return {"role": "assistant", "content": text}
        if PROPOSE_ORDER in results:
            proposed = results[PROPOSE_ORDER]
            ticket = proposed.get("ticket") or {}
            if proposed.get("status") == "approved":
                return self._calls(FIRE_TICKET, [{"items": ticket.get("items"), "table": ticket.get("table")}])
            return {"role": "assistant", "content": "No problem, nothing has been sent. Anything else for you?"}
        return {"role": "assistant", "content": "Noted. Anything else for you?"}
