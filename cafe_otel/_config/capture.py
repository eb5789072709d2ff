"""The content capture switch: whether conversation text may go on telemetry.

Off by default (the specification makes content opt-in). The switch is the official
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`; an explicit argument wins over it.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping

from cafe_otel._config import variables

CAPTURE_ENV = variables.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT


class CaptureMode(enum.Enum):
    """Where captured content goes: on the span (JSON strings), and/or on the spec's
    `gen_ai.client.inference.operation.details` event, a log record carrying the content in
    structured form (configure() then builds a logs pipeline for it)."""

    NO_CONTENT = "NO_CONTENT"
    SPAN_ONLY = "SPAN_ONLY"
    EVENT_ONLY = "EVENT_ONLY"
    SPAN_AND_EVENT = "SPAN_AND_EVENT"

    @property
    def on_span(self) -> bool:
        return self in (CaptureMode.SPAN_ONLY, CaptureMode.SPAN_AND_EVENT)

    @property
    def on_event(self) -> bool:
        return self in (CaptureMode.EVENT_ONLY, CaptureMode.SPAN_AND_EVENT)

    @property
    def enabled(self) -> bool:
        """Whether content goes on spans (the spans' allowlist then takes the content keys);
        the event's content is `on_event`'s."""
        return self.on_span


_ALIASES = {"TRUE": CaptureMode.SPAN_ONLY, "1": CaptureMode.SPAN_ONLY, "YES": CaptureMode.SPAN_ONLY,
            "FALSE": CaptureMode.NO_CONTENT, "0": CaptureMode.NO_CONTENT, "NO": CaptureMode.NO_CONTENT,
            "": CaptureMode.NO_CONTENT}


def parse_capture(value: CaptureMode | str | bool | None) -> CaptureMode:
    """A mode from an enum, a bool, or a string (a mode name or true/false). An unknown
    string means no content: a typo must not switch content capture on."""
    if isinstance(value, CaptureMode):
        return value
    if value is None or value is False:
        return CaptureMode.NO_CONTENT
    if value is True:
        return CaptureMode.SPAN_ONLY
    text = str(value).strip().upper()
    if text in _ALIASES:
        return _ALIASES[text]
    try:
        return CaptureMode(text)
    except ValueError:
        return CaptureMode.NO_CONTENT


def capture_mode(
    explicit: CaptureMode | str | bool | None = None, environ: Mapping[str, str] | None = None
) -> CaptureMode:
    """The explicit argument when given, else the environment variable, else NO_CONTENT."""
    if explicit is not None:
        return parse_capture(explicit)
    environ = os.environ if environ is None else environ
    return parse_capture(environ.get(CAPTURE_ENV))
