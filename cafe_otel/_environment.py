"""The SDK's span limits (`OTEL_ATTRIBUTE_COUNT_LIMIT`, `OTEL_SPAN_*_LIMIT`, ...), checked
and read from the mapping `configure()` is given.

The SDK reads them from `os.environ` and answers a bad one with a bare ValueError: at
`TracerProvider()`, and for `OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT` already when
`opentelemetry.sdk.trace` is first imported. So `cafe_otel/__init__.py` imports this module
before anything else, and it checks `os.environ` then: a bad value is a named
configuration error (exit 20), not an internal error or a plugin that silently did not
load. It imports nothing of the SDK itself until `span_limits` is called.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from cafe.errors import ConfigurationError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanLimits

# variable -> SpanLimits argument
LIMIT_VARIABLES = {
    "OTEL_ATTRIBUTE_COUNT_LIMIT": "max_attributes",
    "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "max_attribute_length",
    "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "max_span_attributes",
    "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT": "max_span_attribute_length",
    "OTEL_SPAN_EVENT_COUNT_LIMIT": "max_events",
    "OTEL_SPAN_LINK_COUNT_LIMIT": "max_links",
    "OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT": "max_event_attributes",
    "OTEL_LINK_ATTRIBUTE_COUNT_LIMIT": "max_link_attributes",
}
MAX_LIMIT = 2**31 - 1
NO_LIMIT = None  # the SDK's "unset"
_DEFAULT_COUNT = 128


class SpanLimitError(ConfigurationError):
    """A span limit variable that is not a whole number (or `unset`)."""

    def __init__(self, variable: str, raw: str) -> None:
        shown = repr(raw[:20] + ("…" if len(raw) > 20 else ""))
        super().__init__(f"{variable}: {shown} is not a whole number from 0 to {MAX_LIMIT} (or unset)")


def check_limits(environ: Mapping[str, str]) -> dict[str, int | None]:
    """The limits the variables set, by SpanLimits argument; `None` for `unset` (no limit)."""
    limits: dict[str, int | None] = {}
    for variable, argument in LIMIT_VARIABLES.items():
        if variable not in environ:
            continue
        raw = environ[variable]
        text = raw.strip().lower()
        if text == "unset":
            limits[argument] = NO_LIMIT
            continue
        if not text.isdigit() or not text.isascii() or int(text) > MAX_LIMIT:
            raise SpanLimitError(variable, raw)
        limits[argument] = int(text)
    return limits


def span_limits(environ: Mapping[str, str]) -> SpanLimits:
    """SpanLimits from `environ`, every one explicit, so the SDK reads none from os.environ."""
    from opentelemetry.sdk.trace import SpanLimits

    found = check_limits(environ)

    def given(argument: str, default: int | None) -> int | None:
        return found.get(argument, default)  # a None found (unset) stays None: no limit

    attributes = given("max_attributes", _DEFAULT_COUNT)
    length = given("max_attribute_length", NO_LIMIT)
    values = {
        "max_attributes": attributes, "max_events": given("max_events", _DEFAULT_COUNT),
        "max_links": given("max_links", _DEFAULT_COUNT),
        "max_span_attributes": given("max_span_attributes", attributes),
        "max_event_attributes": given("max_event_attributes", attributes),
        "max_link_attributes": given("max_link_attributes", attributes),
        "max_attribute_length": length, "max_span_attribute_length": given("max_span_attribute_length", length),
    }
    return SpanLimits(**{name: SpanLimits.UNSET if value is None else value for name, value in values.items()})


check_limits(os.environ)
