"""Declared normalisation: request fields that change on every run (generated ids,
timestamps) are named by path and ignored by matching, with no matcher to write.

A path is dot-separated keys; `*` stands for any key or any list index, and a number for
one list index, e.g. `messages.*.tool_call_id` or `metadata.request_time`; the first
key is always named (a top-level `*` would match the whole request).
A declared object key is removed from both sides before they are compared, so the field
may differ, or be present on one side only; a declared list item is replaced by a
placeholder, so the positions of the others do not move. Undeclared fields still match
exactly.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

IGNORED = "<ignored>"


def _apply(value: Any, parts: Sequence[str]) -> Any:
    head, rest = parts[0], parts[1:]
    if isinstance(value, dict):
        result = {}
        for key, item in value.items():
            if head not in ("*", key):
                result[key] = item
            elif rest:
                result[key] = _apply(item, rest)
            # else: the declared key itself, dropped
        return result
    if isinstance(value, list):
        return [
            (_apply(item, rest) if rest else IGNORED) if head in ("*", str(index)) else item
            for index, item in enumerate(value)
        ]
    return value


def canonical(value: Any) -> Any:
    """A JSON round trip, so tuples, numbers and key order compare as they would on disk."""
    return json.loads(json.dumps(value, sort_keys=True))


_EXAMPLE = "name the field from the top, e.g. messages.*.sent_at or metadata.request_time"


def _shown(path: str) -> str:
    return repr(path) if len(path) <= 60 else f"{path[:57]!r}..."


def parse_path(path: str) -> list[str]:
    """The parts of a declared path. Refused (ValueError): a path with no key, one that
    starts with `*` (alone it ignores the whole request, and under any top-level field it
    reaches into all of them: replay would check next to nothing), and a `*` inside a key
    (`*` stands for a whole key or index, so `sent_*` or `**` would match nothing)."""
    parts = [part for part in path.strip().split(".") if part]
    if not parts:
        raise ValueError(f"an ignore path needs at least one key, got {_shown(path)}")
    if parts[0] == "*":
        raise ValueError(f"ignore path {_shown(path)}: a top-level * matches every field of the request "
                         f"(alone, the whole request), so replay would check next to nothing; {_EXAMPLE}")
    partial = next((part for part in parts if "*" in part and part != "*"), None)
    if partial is not None:
        raise ValueError(f"ignore path {_shown(path)}: * stands for one whole key or list index, not part of "
                         f"one ({len(partial)} characters hold a *); {_EXAMPLE}")
    return parts


def normalise(request: dict[str, Any], ignore: Sequence[str] = ()) -> dict[str, Any]:
    result: Any = canonical(request)
    for path in ignore:
        result = _apply(result, parse_path(path))
    normalised: dict[str, Any] = result
    return normalised
