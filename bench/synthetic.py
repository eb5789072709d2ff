"""Synthetic café traffic: model calls whose requests look like the harness's own, but stay
bounded however long the recording is.

A real request carries the whole conversation so far, so a 10,000-call conversation would
make the last request hundreds of times the size of the first and replay cost would grow for
that reason alone. Here the session is a long run of short exchanges (a customer line; the
model asks for `price_check` on each item named; the tool results; the model's answer), and
each request carries the system prompt, the five tool schemas, the last `window` complete
exchanges and the exchange in progress: what an agent with a sliding context window sends.
Every request is about 4-5 KB of JSON, and every request body is distinct (call ids, table
numbers), so matching on the body is meaningful.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cafe.counter.clients.base import Message, Response, make_response, tool_call
from cafe.counter.menu import EIGHTY_SIXED, MENU
from cafe.counter.prompt import SYSTEM_PROMPT
from cafe.counter.tools import PRICE_CHECK, TOOL_SCHEMAS
from cafe.recording import FORMAT_VERSION, Header, RecordingWriter, Timing

MODEL = "gpt-4o-mini-2024-07-18"
PROVIDER = "openai"
WINDOW = 2  # complete exchanges kept in every request besides the one in progress
_LINES = (
    "Could I get a {a} and a {b} for table {t}, please?",
    "Hi! One {a} to go, and what does a {b} cost? We're at table {t}.",
    "Is the {a} any good today? Table {t} would also like a {b}.",
    "Two things for table {t}: a {a} and a {b}. How much altogether?",
)


@dataclass(frozen=True)
class SyntheticCall:
    messages: list[Message]
    tools: list[dict[str, Any]]
    temperature: float
    response: Response

    @property
    def request(self) -> dict[str, Any]:
        return {"messages": self.messages, "tools": self.tools, "temperature": self.temperature,
                "tool_choice": None}


def _tokens(messages: list[Message]) -> int:
    return len(json.dumps(messages)) // 4 + 420  # ~4 characters a token, plus the tool schemas


def synthetic_calls(count: int, *, seed: int = 7, window: int = WINDOW) -> list[SyntheticCall]:
    return list(_generate(count, seed, window))


def _generate(count: int, seed: int, window: int) -> Iterator[SyntheticCall]:
    rng = random.Random(seed)
    names = sorted(MENU)
    system: Message = {"role": "system", "content": SYSTEM_PROMPT}
    history: list[list[Message]] = []
    made = 0
    exchange = 0
    while made < count:
        exchange += 1
        first, second = rng.sample(names, 2)
        line = rng.choice(_LINES).format(a=first, b=second, t=rng.randint(1, 99))
        user: Message = {"role": "user", "content": line}
        context = [system, *(m for done in history[-window:] for m in done), user]

        calls = [
            tool_call(f"call_{exchange:05d}_{index}", PRICE_CHECK, json.dumps({"item": item}))
            for index, item in enumerate((first, second), start=1)
        ]
        asking: Message = {"role": "assistant", "content": None, "tool_calls": calls}
        made += 1
        yield SyntheticCall(list(context), TOOL_SCHEMAS, 0.0, make_response(
            asking, model=MODEL, response_id=f"chatcmpl-bench{made:06d}",
            usage=(_tokens(context), 24)))
        if made >= count:
            return

        results: list[Message] = []
        for call, item in zip(calls, (first, second), strict=True):
            available = item not in EIGHTY_SIXED
            result = {"item": item, "price_eur": MENU[item].price_eur, "available": available}
            results.append({"role": "tool", "tool_call_id": call["id"],
                            "content": json.dumps(result, separators=(",", ":"), sort_keys=True)})
        total = sum(MENU[item].price_eur for item in (first, second))
        answer: Message = {
            "role": "assistant",
            "content": f"A {first} is €{MENU[first].price_eur:.2f} and a {second} is "
                       f"€{MENU[second].price_eur:.2f}, €{total:.2f} together. Shall I propose the order?",
        }
        context = [*context, asking, *results]
        made += 1
        yield SyntheticCall(context, TOOL_SCHEMAS, 0.0, make_response(
            answer, model=MODEL, response_id=f"chatcmpl-bench{made:06d}",
            usage=(_tokens(context), 31)))
        history.append([user, asking, *results, answer])


def write_recording(path: Path, calls: list[SyntheticCall]) -> Path:
    """A version-1 recording written by cafe's own writer (scrubbed, one line a call)."""
    header = Header(version=FORMAT_VERSION, harness="cafe bench", model=MODEL, provider=PROVIDER,
                    recorded_at="2026-01-01T00:00:00.000000Z", seed=7,
                    clock_origin_unix_nano=1_767_225_600_000_000_000)
    writer = RecordingWriter(path, header, mode="all")
    try:
        for index, call in enumerate(calls):
            writer.write_call(call.request, call.response,
                              Timing(1_767_225_600_000_000_000 + index * 1_000_000, 900_000))
    finally:
        writer.close()
    return path
