"""The GenAI conventions as published (semconv 1.41.1): the attribute registry
(`model/*/registry.yaml`) and the JSON schemas for captured content (`docs/gen-ai/gen-ai-*.json`),
read from the shared notes beside the checkout when present
(`CAFE_SEMCONV_DIR` points elsewhere); without them the tests that validate against them skip."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

ROOT = Path(__file__).resolve().parents[1]
INPUT_MESSAGES = "gen-ai-input-messages.json"
OUTPUT_MESSAGES = "gen-ai-output-messages.json"
SYSTEM_INSTRUCTIONS = "gen-ai-system-instructions.json"
TOOL_DEFINITIONS = "gen-ai-tool-definitions.json"


def semconv_dir() -> Path:
    explicit = os.environ.get("CAFE_SEMCONV_DIR")
    candidates = [Path(explicit)] if explicit else [ROOT.parent / "shared" / "semconv-1.41.1",
                                                    ROOT.parent.parent / "shared" / "semconv-1.41.1"]
    for candidate in candidates:
        if (candidate / "model" / "gen-ai" / "registry.yaml").is_file():
            return candidate
    pytest.skip("the pinned semantic conventions (semconv-1.41.1) are not beside this checkout")


@functools.cache
def _validator(name: str) -> Draft202012Validator:
    schema = json.loads((semconv_dir() / "docs" / "gen-ai" / name).read_text(encoding="utf-8"))
    return Draft202012Validator(schema)


def violations(name: str, value: Any) -> list[str]:
    """Where `value` breaks the schema `name` (empty: it conforms)."""
    return [f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
            for error in _validator(name).iter_errors(value)]


def valid(name: str, value: Any) -> Any:
    """`value`, after checking that it conforms to the schema `name`."""
    found = violations(name, value)
    assert found == [], (name, found)
    return value


@functools.cache
def registry() -> dict[str, str]:
    """Each attribute the registry defines, by its type (`enum` for one with members)."""
    found: dict[str, str] = {}
    for path in (semconv_dir() / "model").glob("*/registry.yaml"):
        for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]:
            for attribute in group.get("attributes", []):
                kind = attribute.get("type")
                found[attribute["id"]] = "enum" if isinstance(kind, dict) else str(kind)
    return found


OURS = ("cafe.", "http.", "url.", "network.", "rpc.", "service.")  # our namespace, or other conventions
_PYTHON_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "int": (int,), "double": (float,),
                                              "boolean": (bool,), "string[]": (tuple,), "enum": (str,),
                                              "any": (str,)}
_CONTENT = {"gen_ai.input.messages": INPUT_MESSAGES, "gen_ai.output.messages": OUTPUT_MESSAGES,
            "gen_ai.system_instructions": SYSTEM_INSTRUCTIONS, "gen_ai.tool.definitions": TOOL_DEFINITIONS}


def span_violations(attributes: Mapping[str, Any]) -> list[str]:
    """How a span's attributes break the 1.41.1 conventions (empty: they conform): a key the
    registry does not define, a value not of the key's registry type, content that its JSON
    schema refuses."""
    found = []
    for key, value in attributes.items():
        if key.startswith(OURS):
            continue
        kind = registry().get(key)
        if kind is None:
            found.append(f"{key}: not in the registry")
            continue
        if not isinstance(value, _PYTHON_TYPES[kind]) or (kind == "int" and type(value) is not int) or (
                kind == "string[]" and not all(isinstance(item, str) for item in value)):
            found.append(f"{key}: {type(value).__name__}, not the registry's {kind}")
        if key in _CONTENT:
            found.extend(f"{key}: {problem}" for problem in violations(_CONTENT[key], json.loads(value)))
    return found
