"""The demo's offline model: deterministic, no network, and it does the whole job.

Where `ScriptedClient` takes an order in the fewest steps, this one plays the whole counter
the way the shift rules ask: it checks a named item against an allergy the customer
mentioned, prices what is ordered, proposes the order for a table, fires it once approved,
and (with `retry_fire`, as a model might after a reply it thinks it lost) fires the same
order a second time, which the protected executor must refuse as a duplicate.

Its replies depend only on the conversation, so a recording of it replays exactly.
"""

from __future__ import annotations

import json
import re
from typing import Any

from cafe.counter.clients.base import Message, Response, ToolCallIdCheck, make_response, tool_call
from cafe.counter.menu import KNOWN_ALLERGENS, MENU, items_named_in
from cafe.counter.tools import CHECK_ALLERGENS, FIRE_TICKET, PRICE_CHECK, PROPOSE_ORDER

STORY_MODEL = "story-barista-1"
STORY_PROVIDER = "cafe.scripted"
TOOL_TURN_USAGE = (120, 18)
TEXT_TURN_USAGE = (140, 16)

_TABLE = re.compile(r"\btable\s+(\d{1,2})\b", re.IGNORECASE)


def _allergy(messages: list[Message]) -> str | None:
    """The allergen the customer said they must avoid, from any of their lines."""
    for message in messages:
        if message.get("role") != "user":
            continue
        words = re.findall(r"[a-z]+", str(message.get("content") or "").lower())
        for word in words:
            if word in KNOWN_ALLERGENS:
                return str(word)
    return None


def _requested(messages: list[Message]) -> list[tuple[str, dict[str, Any]]]:
    """(tool name, arguments) of every tool call the model has made so far, in order."""
    found = []
    for message in messages:
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except ValueError:
                arguments = {}
            found.append((str(function.get("name")), arguments if isinstance(arguments, dict) else {}))
    return found


def _last_batch(messages: list[Message]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(tool name, arguments, result) of the tool messages at the end of the conversation."""
    results: list[Message] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        results.insert(0, message)
    ids = [str(call.get("id")) for message in messages for call in message.get("tool_calls") or []]
    opened = dict(zip(ids, _requested(messages), strict=True))
    batch = []
    for message in results:
        name, arguments = opened.get(str(message.get("tool_call_id")), ("", {}))
        try:
            result = json.loads(str(message.get("content") or "{}"))
        except ValueError:
            result = {}
        batch.append((name, arguments, result if isinstance(result, dict) else {}))
    return batch


def _last_user_line(messages: list[Message]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


class StoryClient:
    model = STORY_MODEL
    provider = STORY_PROVIDER

    def __init__(self, *, retry_fire: bool = True) -> None:
        self.retry_fire = retry_fire
        self.calls = 0
        self._check_tool_call_ids = ToolCallIdCheck()  # each message once, when first sent

    def __repr__(self) -> str:
        return f"StoryClient(model={self.model!r}, calls={self.calls})"

    def chat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        temperature: float = 0.0,
        tool_choice: Any = None,
    ) -> Response:
        self._check_tool_call_ids(messages)
        self.calls += 1
        message = self._reply(messages)
        usage = TOOL_TURN_USAGE if message.get("tool_calls") else TEXT_TURN_USAGE
        return make_response(message, model=self.model, response_id=f"story-{self.calls}", usage=usage)

    def _calls(self, *calls: tuple[str, dict[str, Any]]) -> Message:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                tool_call(f"call_{self.calls}_{index}", name, json.dumps(arguments, sort_keys=True))
                for index, (name, arguments) in enumerate(calls, start=1)
            ],
        }

    @staticmethod
    def _say(text: str) -> Message:
        return {"role": "assistant", "content": text}

    def _reply(self, messages: list[Message]) -> Message:
        last = messages[-1] if messages else {}
        if last.get("role") == "tool":
            return self._after_tools(messages)
        if last.get("role") != "user":
            return self._say("What can I get you today?")
        line = str(last.get("content") or "")
        named = items_named_in(line)
        if not named:
            served = any(message.get("role") == "tool" for message in messages)
            return self._say("Thank you, enjoy your visit!" if served else "What can I get you today?")
        allergy = _allergy(messages)
        checked = {arguments.get("item") for name, arguments in _requested(messages) if name == CHECK_ALLERGENS}
        calls = [(CHECK_ALLERGENS, {"item": item, "allergen": allergy})
                 for item in named if allergy and item not in checked]
        if not line.rstrip().endswith("?"):
            calls += [(PRICE_CHECK, {"item": item}) for item in named]
        if not calls:
            return self._say("Noted. Anything else for you?")
        return self._calls(*calls)

    def _after_tools(self, messages: list[Message]) -> Message:
        batch = _last_batch(messages)
        names = [name for name, _, _ in batch]
        if FIRE_TICKET in names:
            _, arguments, result = batch[names.index(FIRE_TICKET)]
            fires = sum(1 for requested, _ in _requested(messages) if requested == FIRE_TICKET)
            if result.get("status") == "fired" and self.retry_fire and fires == 1:
                return self._calls((FIRE_TICKET, arguments))
            if result.get("status") == "fired":
                return self._say(f"Ticket {result.get('ticket_number')} is with the kitchen. Enjoy!")
            return self._say("I could not send that order; let me fetch a colleague.")
        if PROPOSE_ORDER in names:
            _, _, result = batch[names.index(PROPOSE_ORDER)]
            ticket = result.get("ticket") or {}
            if result.get("status") == "approved":
                return self._calls((FIRE_TICKET, {"items": ticket.get("items"), "table": ticket.get("table")}))
            return self._say("No problem, nothing has been sent. What would you like instead?")
        table = _TABLE.search(_last_user_line(messages))
        priced = [arguments["item"] for name, arguments, result in batch
                  if name == PRICE_CHECK and result.get("available") and arguments.get("item") in MENU]
        if priced and table:
            return self._calls((PROPOSE_ORDER, {"items": priced, "table": int(table.group(1))}))
        if CHECK_ALLERGENS in names:
            return self._say(" ".join(_allergen_sentence(result) for _, _, result
                                      in batch if result.get("item")))
        return self._say("Noted. Anything else for you?")


def _allergen_sentence(result: dict[str, Any]) -> str:
    item, allergen = result.get("item"), result.get("allergen")
    others = [a for a in result.get("allergens") or [] if a != allergen]
    also = f" (it does contain {', '.join(others)})" if others else ""
    if result.get("contains"):
        return f"The {item} contains {allergen}, so I would not recommend it."
    return f"The {item} has no {allergen}{also}."
