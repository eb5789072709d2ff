"""The SDK's span limits (`OTEL_ATTRIBUTE_COUNT_LIMIT`, `OTEL_SPAN_*_LIMIT`, ...), checked
and read from the mapping `configure()` is given, so the SDK reads none of them itself.

The SDK answers a bad one with a bare ValueError: at `TracerProvider()`, and for
`OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT` already when `opentelemetry.sdk.trace` is first imported,
from `os.environ`. Settings resolution (`cafe_otel._config.settings.resolve_settings`) checks the
limits of the environ it is handed; `import_sdk()` is how cafe_otel's entry points import
the SDK: a value the SDK would refuse on import is held out of `os.environ` for the import
alone, so that the SDK (and the module importing it: our distro, the `cafe` plugin) loads,
and the value is the named error of the settings that read it (exit 20; under
`opentelemetry-instrument`, the one "telemetry is off" line), not a traceback or a plugin
that silently did not load. Importing this module reads nothing.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from cafe_otel._config.numbers import ascii_whole
from cafe_otel._config.parse import TelemetryConfigError
from cafe_otel._config.variables import GRPC_VERBOSITY, SDK_IMPORT_LIMIT, SPAN_LIMIT_VARIABLES

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanLimits

LIMIT_VARIABLES = SPAN_LIMIT_VARIABLES  # variable -> SpanLimits argument
MAX_LIMIT = 2**31 - 1
NO_LIMIT = None  # the SDK's "unset"
_DEFAULT_COUNT = 128


class SpanLimitError(TelemetryConfigError):
    """A span limit variable that is not a whole number (or `unset`); its value is not shown."""

    def __init__(self, variable: str) -> None:
        super().__init__(f"{variable}: expected a whole number from 0 to {MAX_LIMIT} in ASCII digits, "
                         "or unset (the value given is not shown)")


def check_limits(environ: Mapping[str, str]) -> dict[str, int | None]:
    """The limits the variables set, by SpanLimits argument; `None` for `unset` (no limit)."""
    limits: dict[str, int | None] = {}
    for variable, argument in LIMIT_VARIABLES.items():
        if variable not in environ:
            continue
        text = environ[variable].strip().lower()
        if text == "unset":
            limits[argument] = NO_LIMIT
            continue
        number = ascii_whole(text)
        if number is None or text.startswith(("+", "-")) or number > MAX_LIMIT:
            raise SpanLimitError(variable)
        limits[argument] = number
    return limits


_SDK_IMPORT = threading.Lock()


def import_sdk() -> None:
    """Import `opentelemetry.sdk.trace`, whose import reads `OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT`
    from `os.environ` and raises a bare ValueError on a bad one. A bad one is held out of
    `os.environ` while the SDK is imported and put back at once (the process environment is
    left as it was found, for the process and its children): `check_limits` names it when the
    settings are resolved."""
    with _SDK_IMPORT:
        if "opentelemetry.sdk.trace" in sys.modules:
            return
        value = os.environ.get(SDK_IMPORT_LIMIT)
        held = value is not None and not _sdk_takes(value)
        if held:
            os.environ.pop(SDK_IMPORT_LIMIT, None)
        try:
            importlib.import_module("opentelemetry.sdk.trace")
        finally:
            if held and value is not None:
                os.environ[SDK_IMPORT_LIMIT] = value


def _sdk_takes(value: str) -> bool:
    """Whether the SDK's import takes `value` (`SpanLimits._from_env_if_absent`): `unset`, or
    what `int()` reads as a number from 0 on. Ours (`check_limits`) is stricter."""
    text = value.strip().lower()
    if text == "unset":
        return True
    try:
        return int(text) >= 0
    except ValueError:
        return False


_GRPC_IMPORT = threading.Lock()


def import_grpc_quietly() -> None:
    """Import `grpc` (when installed and not yet imported) with its C core quiet.

    The core writes its own lines (a failed TLS handshake, ...) straight to stderr, not through
    logging, and offers no call to quiet it: it reads `GRPC_VERBOSITY` once, with getenv, while
    `grpc` is imported. So the variable is `NONE` for the import alone, unless it is already
    set: the process environment is left as it was found, for the process and its children."""
    with _GRPC_IMPORT:
        if "grpc" in sys.modules:
            return
        given = GRPC_VERBOSITY in os.environ
        if not given:
            os.environ[GRPC_VERBOSITY] = "NONE"
        try:
            importlib.import_module("grpc")
        except ImportError:
            return  # no `grpc` extra: building a gRPC exporter names it
        finally:
            if not given:
                os.environ.pop(GRPC_VERBOSITY, None)


def span_limits(found: Mapping[str, int | None]) -> SpanLimits:
    """SpanLimits from the limits `check_limits` found, every one explicit, so the SDK reads
    none from os.environ."""
    from opentelemetry.sdk.trace import SpanLimits


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
