"""Helpers for JSON-shaped data (dicts, lists, strings, numbers, booleans, None): the shape
every message, request and response in the harness has."""

from __future__ import annotations

import copy
import gc
import json
from typing import Any

import orjson

from cafe.errors import NotJSON

# orjson refuses (instead of converting) subclasses of str, int, dict and list, dataclasses
# and datetimes, so bytes it does write come from plain JSON types.
_PLAIN = (orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATACLASS
          | orjson.OPT_PASSTHROUGH_DATETIME)
# Keys sorted, so that two equal dicts built in different orders still encode alike.
_CANONICAL = _PLAIN | orjson.OPT_SORT_KEYS


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-shaped data, several times faster than `copy.deepcopy`; anything
    else falls back to it. Containers are copied with a stack of their own, not by
    recursion: a document as deep as a reader accepts (orjson's 1,024 levels) is copied too."""
    if not isinstance(value, dict | list):
        return _copy_leaf(value)
    root: dict[Any, Any] | list[Any] = {} if isinstance(value, dict) else []
    pending: list[tuple[dict[Any, Any] | list[Any], dict[Any, Any] | list[Any]]] = [(value, root)]
    while pending:
        source, target = pending.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in items:
            if isinstance(item, dict | list):
                child: dict[Any, Any] | list[Any] = {} if isinstance(item, dict) else []
                pending.append((item, child))
            else:
                child = _copy_leaf(item)
            if isinstance(target, dict):
                target[key] = child
            else:
                target.append(child)
    return root


def _copy_leaf(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return copy.deepcopy(value)


def fresh_json(value: Any) -> Any:
    """A deep copy of a JSON document as read from a file (plain types, integers within 64
    bits, no lone surrogates), made in C by encoding and decoding it; anything orjson cannot
    round-trip exactly falls back to `copy_json`."""
    try:
        return orjson.loads(orjson.dumps(value, option=_PLAIN))
    except orjson.JSONEncodeError:
        return copy_json(value)


def same_json(a: Any, b: Any) -> bool:
    """Equal as JSON documents: Python's `==` (fast, in C) and then the one thing it
    forgives that JSON does not, a boolean standing for a number (False == 0). An integer
    and a float of the same value are the same JSON number and stay equal.

    The type check is first tried in C: equal values whose canonical encodings are the same
    bytes have a boolean exactly where the other has one (true/false never encode like a
    number). Only when the bytes differ (1 against 1.0, or a value orjson refuses) does the
    walk in Python decide. (orjson writes an enum member as its value, as `json.dumps` does,
    so a str or int enum is the same document as its value.)"""
    if a != b:
        return False
    encoded = _canonical(a)
    return (encoded is not None and encoded == _canonical(b)) or _same_types(a, b)


def _canonical(value: Any) -> bytes | None:
    try:
        return orjson.dumps(value, option=_CANONICAL)
    except orjson.JSONEncodeError:
        return None


def _same_types(a: Any, b: Any) -> bool:
    kind_a, kind_b = type(a), type(b)
    if kind_a is not kind_b:
        return kind_a in (int, float) and kind_b in (int, float)
    if kind_a is dict:
        return all(_same_types(value, b[key]) for key, value in a.items())
    if kind_a is list:
        return all(map(_same_types, a, b))
    return True


# The exact types of a JSON document as Python holds it; anything else (a subclass, an enum
# member, a UUID, an orjson.Fragment) is not one, whatever orjson writes for it.
_PLAIN_TYPES = frozenset((dict, list, str, int, float, bool, type(None)))
# orjson refuses to write a document nested deeper than this.
_MAX_DEPTH = 256


def plain_json(value: Any) -> bool:
    """Made only of dicts, lists, strings, integers, booleans, None and finite floats, each of
    exactly that type: the values for which equal orjson bytes mean the same JSON document.
    (orjson also writes NaN and infinities as null, an enum member as its value, a UUID as a
    string and a Fragment as its bytes.)

    Walked a level at a time in C: `gc.get_referents` of a level's dicts and lists is their
    values and items (strings and numbers have none), then the types of the whole level are
    checked at once."""
    level = [value]
    for _ in range(_MAX_DEPTH + 1):
        if not level:
            return True
        kinds = set(map(type, level))
        if not kinds <= _PLAIN_TYPES:
            return False
        if float in kinds and not all(item - item == 0.0 for item in level if type(item) is float):
            return False  # inf - inf and nan - nan are nan
        level = gc.get_referents(*level)
    return False


def describe(value: Any) -> str:
    """What a value is, by type and size, never its content."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    if isinstance(value, list):
        return f"an array of {len(value)}"
    if isinstance(value, dict):
        return f"an object of {len(value)} key(s)" if value else "an empty object"
    return type(value).__name__


_SCALARS = (str, int, float, bool, type(None))
_MAX_WALK_DEPTH = 500
_PLAIN_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def key_step(key: object) -> str:
    # A path names protocol keys as they are; any other key (customer text, a control
    # character, a bracket that would read as an index) only by its size, so the path can go
    # into an error line and is never ambiguous.
    text = str(key)
    if text and len(text) <= 64 and set(text) <= _PLAIN_KEY_CHARS:
        return f".{text}"
    return f".<a key of {len(text)} characters>"


# A path into a JSON document as steps: an object key (str) or a list index (int). Kept as
# steps so that a key spelt like an index (`messages[1]`) or holding a bracket never has
# to be read back from text.
JsonPath = tuple[str | int, ...]


def shown_path(steps: JsonPath) -> str:
    """`steps` as an error line names them: `$.messages[1].content`, keys by `key_step`."""
    return "$" + "".join(f"[{step}]" if isinstance(step, int) else key_step(step) for step in steps)


def _first_non_json(value: Any, where: str) -> tuple[str, str] | None:
    """The path and kind of the first value `json.dumps` cannot write, walked without
    recursion (the value may be nested too deep for it, or hold itself)."""
    stack: list[tuple[Any, str, int, frozenset[int]]] = [(value, where, 0, frozenset())]
    while stack:
        item, path, depth, ancestors = stack.pop()
        if depth > _MAX_WALK_DEPTH:
            return path, f"nesting deeper than {_MAX_WALK_DEPTH} levels"
        if isinstance(item, dict | list | tuple):
            if id(item) in ancestors:
                return path, "a value that contains itself"
            inner = ancestors | {id(item)}
            if isinstance(item, dict):
                for key in item:
                    if not isinstance(key, _SCALARS):
                        return path, f"a key of type {type(key).__name__}"
                children = [(child, path + key_step(key)) for key, child in item.items()]
            else:
                children = [(child, f"{path}[{index}]") for index, child in enumerate(item)]
            stack.extend((child, step, depth + 1, inner) for child, step in reversed(children))
        elif isinstance(item, int) and not isinstance(item, bool):
            try:
                str(item)
            except ValueError:  # beyond the interpreter's digit limit for int-to-text
                return path, "an integer too long to write"
        elif not isinstance(item, _SCALARS):
            return path, f"a value of type {type(item).__name__}"
    return None


def json_document(value: Any, where: str = "request") -> Any:
    """`value` as it reads back from JSON text (tuples become lists, NaN stays NaN), or
    `NotJSON` naming the first value that JSON cannot write and its path."""
    try:
        return json.loads(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError, RecursionError):
        path, kind = _first_non_json(value, where) or (where, "a value JSON cannot write")
        raise NotJSON(path if len(path) <= 160 else path[:160] + "…", kind) from None
