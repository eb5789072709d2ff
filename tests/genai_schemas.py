"""The GenAI conventions' published JSON schemas for captured content (semconv 1.41.1,
`docs/gen-ai/gen-ai-*.json`), read from the shared notes beside the checkout when present
(`CAFE_SEMCONV_DIR` points elsewhere); without them the tests that validate against them skip."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import pytest
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
