"""Captured content as it leaves: scrubbed and written as compact JSON (the switch itself is a
setting: `cafe_otel._config.capture`). The content's shape, the GenAI conventions' message
parts, is each API's reading's (`cafe.apis`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cafe.privacy import Scrubber

# The switch is a setting, read where settings are read; re-exported for the span code.
from cafe_otel._config.capture import CAPTURE_ENV as CAPTURE_ENV
from cafe_otel._config.capture import CaptureMode as CaptureMode
from cafe_otel._config.capture import capture_mode as capture_mode
from cafe_otel._config.capture import parse_capture as parse_capture


def content_scrubber(environ: Mapping[str, str] | None = None) -> Scrubber:
    """What captured content is scrubbed with before it leaves: the recording's scrubber
    (its default patterns and CAFE_SCRUB_PATTERNS); the live client's secrets are added
    as literals once they are known (`MetadataOnlySpanProcessor.add_secrets`)."""
    return Scrubber.from_environment(environ)


def to_json(value: Any) -> str:
    """Compact, key-sorted JSON: attribute values must be strings, and stable."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
