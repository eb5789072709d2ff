"""A structural diff of two JSON values: the path of the first difference, and a short
description of each side that says what it is without quoting conversation text."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from cafe.jsondata import JsonPath, shown_path

# Values under these keys are protocol metadata, safe and useful to show verbatim.
_SHOWN_KEYS = frozenset(
    {"role", "type", "name", "id", "tool_call_id", "finish_reason", "model", "temperature",
     "tool_choice", "index"}
)
_ABSENT = object()


@dataclass(frozen=True)
class Difference:
    steps: JsonPath  # where the documents first differ, a key or an index a step
    recorded: str
    incoming: str

    @property
    def path(self) -> str:
        """The steps as an error line names them (`shown_path`)."""
        return shown_path(self.steps)


def describe(value: Any, key: str | None = None) -> str:
    if value is _ABSENT:
        return "absent"
    if isinstance(value, str):
        if key in _SHOWN_KEYS:
            return repr(value[:40] + ("…" if len(value) > 40 else ""))
        # surrogatepass: a lone surrogate (read from a `\ud800` escape) has no UTF-8 form.
        digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        return f"text({len(value)} chars, sha256 {digest})"
    if isinstance(value, dict):
        keys = ",".join(sorted(value))
        return "object{" + (keys if len(keys) <= 60 else keys[:60] + "…") + "}"
    if isinstance(value, list):
        return f"array({len(value)})"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        if value.bit_length() > 14_000:  # past int-to-text's digit limit, which would raise
            return "integer(more than 4,000 digits)"
        return f"integer({len(str(abs(value)))} digits)"
    return repr(value)


def _same_scalar(recorded: Any, incoming: Any) -> bool:
    # JSON has one number type: 0 and 0.0 are the same value, but true is not 1.
    numbers = (int, float)
    if (isinstance(recorded, numbers) and isinstance(incoming, numbers)
            and not isinstance(recorded, bool) and not isinstance(incoming, bool)):
        return recorded == incoming
    return type(recorded) is type(incoming) and recorded == incoming


def first_difference(recorded: Any, incoming: Any) -> Difference | None:
    """Where two JSON documents first differ (keys in sorted order, then list positions), with
    each side described without quoting text (`describe`)."""
    return _first_difference(recorded, incoming, (), None)


def _first_difference(recorded: Any, incoming: Any, steps: JsonPath, key: str | None) -> Difference | None:
    if isinstance(recorded, dict) and isinstance(incoming, dict):
        for name in sorted(set(recorded) | set(incoming)):
            found = _first_difference(
                recorded.get(name, _ABSENT), incoming.get(name, _ABSENT), (*steps, name), name
            )
            if found:
                return found
        return None
    if isinstance(recorded, list) and isinstance(incoming, list):
        for index in range(max(len(recorded), len(incoming))):
            found = _first_difference(
                recorded[index] if index < len(recorded) else _ABSENT,
                incoming[index] if index < len(incoming) else _ABSENT,
                (*steps, index),
                key,
            )
            if found:
                return found
        return None
    if _same_scalar(recorded, incoming):
        return None
    # A message's `name` may be a person's name; only a function's name is shown verbatim.
    shown = key if key != "name" or steps[-2:] == ("function", "name") else None
    return Difference(steps, describe(recorded, shown), describe(incoming, shown))


def summarise_request(request: dict[str, Any]) -> str:
    messages = request.get("messages") or []
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    content = last.get("content")
    size = f", {len(content)} chars" if isinstance(content, str) else ""
    return f"{len(messages)} messages, the last from {last.get('role', '?')}{size}"
