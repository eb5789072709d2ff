"""Checking a tool call's arguments in three stages: parse, shape, meaning.

Each failed constraint becomes one short, exact problem line. The lines go back to the
model as the tool result (that is the re-ask), so they name the field and the rule.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

from cafe.counter.menu import ALTERNATIVES, EIGHTY_SIXED, MENU
from cafe.counter.tools import FIRE_TICKET, PROPOSE_ORDER, TOOL_NAMES, TOOL_SCHEMAS

_VALIDATORS = {
    tool["function"]["name"]: Draft202012Validator(tool["function"]["parameters"])
    for tool in TOOL_SCHEMAS
}


@dataclass
class CheckedArguments:
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    stage: str = "passed"  # the first stage that failed: parse | shape | meaning

    @property
    def ok(self) -> bool:
        return not self.problems


def _where(path: Any) -> str:
    parts = [f"[{p}]" if isinstance(p, int) else f".{p}" for p in path]
    return ("arguments" + "".join(parts)) if parts else "arguments"


def check_arguments(tool: str, raw: str | None) -> CheckedArguments:
    result = CheckedArguments(tool=tool)
    if tool not in TOOL_NAMES:
        result.stage = "parse"
        result.problems.append(f"unknown tool {tool!r}; tools are: {', '.join(sorted(TOOL_NAMES))}")
        return result
    if raw is not None and not isinstance(raw, str):
        result.stage = "parse"
        result.problems.append(f"arguments must be a JSON-encoded string, got {type(raw).__name__}")
        return result
    try:
        parsed = json.loads(raw or "{}")
    except json.JSONDecodeError as error:
        result.stage = "parse"
        result.problems.append(f"arguments are not valid JSON ({error.msg} at column {error.colno})")
        return result
    if not isinstance(parsed, dict):
        result.stage = "parse"
        result.problems.append(f"arguments must be a JSON object, got {type(parsed).__name__}")
        return result
    result.arguments = parsed
    shape = sorted(_VALIDATORS[tool].iter_errors(parsed), key=lambda e: list(e.absolute_path))
    if shape:
        result.stage = "shape"
        result.problems.extend(f"{_where(e.absolute_path)}: {e.message}" for e in shape)
        return result
    result.problems.extend(_meaning_problems(tool, parsed))
    if result.problems:
        result.stage = "meaning"
    return result


def _meaning_problems(tool: str, arguments: dict[str, Any]) -> list[str]:
    problems = []
    if "table" in arguments and type(arguments["table"]) is not int:
        problems.append("arguments.table: must be a whole number, not a float")
    names = arguments.get("items", [arguments["item"]] if "item" in arguments else [])
    for index, name in enumerate(names):
        where = f"arguments.items[{index}]" if "items" in arguments else "arguments.item"
        if name not in MENU:
            problems.append(f"{where}: {name!r} is not an exact menu item name")
        elif tool in (PROPOSE_ORDER, FIRE_TICKET) and name in EIGHTY_SIXED:
            problems.append(
                f"{where}: {name!r} is 86'd today; the closest alternative is "
                f"{ALTERNATIVES.get(name, 'none')!r}"
            )
    return problems
