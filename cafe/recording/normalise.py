"""Declared normalisation: request fields that change on every run (generated ids,
timestamps) are named by path and ignored by matching, with no matcher to write.

A path is dot-separated keys; `*` stands for any key or any list index, e.g.
`messages.*.tool_call_id` or `metadata.request_time`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

IGNORED = "<ignored>"


def _apply(value: Any, parts: Sequence[str]) -> Any:
    if not parts:
        return IGNORED
    head, rest = parts[0], parts[1:]
    if isinstance(value, dict):
        return {
            key: (_apply(item, rest) if head in ("*", key) else item) for key, item in value.items()
        }
    if isinstance(value, list):
        return [
            _apply(item, rest) if head == "*" or head == str(index) else item
            for index, item in enumerate(value)
        ]
    return value


def canonical(value: Any) -> Any:
    """A JSON round trip, so tuples, numbers and key order compare as they would on disk."""
    return json.loads(json.dumps(value, sort_keys=True))


def normalise(request: dict[str, Any], ignore: Sequence[str] = ()) -> dict[str, Any]:
    result: Any = canonical(request)
    for path in ignore:
        result = _apply(result, [part for part in path.split(".") if part])
    return result
