"""cafe_otel: GenAI spans and metrics on OpenTelemetry (semconv 1.41.1) for any agent that
calls the `openai` SDK, and for the café example. How to use it: docs/telemetry.md,
docs/instrumentation.md and docs/privacy.md.

The names below are the public face; every module whose name starts with `_` is private and
may change between releases. Three modules are public beside it: `cafe_otel.semconv` (every
attribute and metric name), `cafe_otel.agent` (agent and tool spans) and
`cafe_otel.instrumentation` (the `opentelemetry-instrument` entry points). Inside:
`_config/` (every `OTEL_*` and `CAFE_*` variable read once, `resolve()`), `_configure.py`
(`configure()`: providers, chains, the handle), `_wire/` (a call read through `cafe.apis` into
span attributes and metrics), `_spans/` (cafe's trace events to spans), `_privacy/` (the
shapes, the metadata-only check, the redacting log step), `_export/` (batching, the fail-soft
boundary, the account), `_metrics/`, `_offline/` (a recording to spans, OTLP bytes), `_cli/`
(`--otlp`, `cafe export`) and `_counter/` (the café example's side: its demo and golden files).

Metadata-only by default, with a fail-soft, bounded export boundary. Importing this
package has no side effects and reads no environment: nothing global is set, the SDK is
imported when a name below is first used, and `configure()` returns a handle (and makes its
providers the global ones unless told not to).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cafe_otel._config.capture import CaptureMode, capture_mode
    from cafe_otel._config.options import AdvancedOptions, BatchOptions, MetricsOptions
    from cafe_otel._config.settings import TelemetryConfigError, resolve_settings
    from cafe_otel._configure import TelemetryHandle, configure
    from cafe_otel._export.account import TelemetryAccount
    from cafe_otel._export.batch import BoundedBatchSpanProcessor
    from cafe_otel._export.failsoft import FailSoftSpanExporter
    from cafe_otel._metrics.listener import MetricsListener
    from cafe_otel._offline.otlp_bytes import describe, diff, encode
    from cafe_otel._offline.recording_export import export_recording
    from cafe_otel._privacy.processor import MetadataOnlySpanProcessor, sanitise_span
    from cafe_otel._privacy.shapes import Shape, bool_shape, float_shape, int_shape, text_shape
    from cafe_otel._spans.ids import SequentialIdGenerator
    from cafe_otel._spans.listener import SpanListener
    from cafe_otel._spans.tracer import OTelTracer
    from cafe_otel.agent import execute_tool, invoke_agent
    from cafe_otel.semconv import GENAI_SEMCONV_VERSION, SCHEMA_URL

_EXPORTS = {
    "GENAI_SEMCONV_VERSION": "cafe_otel.semconv",
    "SCHEMA_URL": "cafe_otel.semconv",
    "AdvancedOptions": "cafe_otel._config.options",
    "BatchOptions": "cafe_otel._config.options",
    "BoundedBatchSpanProcessor": "cafe_otel._export.batch",
    "CaptureMode": "cafe_otel._config.capture",
    "FailSoftSpanExporter": "cafe_otel._export.failsoft",
    "MetadataOnlySpanProcessor": "cafe_otel._privacy.processor",
    "MetricsListener": "cafe_otel._metrics.listener",
    "MetricsOptions": "cafe_otel._config.options",
    "OTelTracer": "cafe_otel._spans.tracer",
    "SequentialIdGenerator": "cafe_otel._spans.ids",
    "SpanListener": "cafe_otel._spans.listener",
    "TelemetryAccount": "cafe_otel._export.account",
    "TelemetryConfigError": "cafe_otel._config.settings",
    "TelemetryHandle": "cafe_otel._configure",
    "capture_mode": "cafe_otel._config.capture",
    "configure": "cafe_otel._configure",
    "describe": "cafe_otel._offline.otlp_bytes",
    "diff": "cafe_otel._offline.otlp_bytes",
    "encode": "cafe_otel._offline.otlp_bytes",
    "export_recording": "cafe_otel._offline.recording_export",
    "resolve_settings": "cafe_otel._config.settings",
    "sanitise_span": "cafe_otel._privacy.processor",
    "Shape": "cafe_otel._privacy.shapes",
    "bool_shape": "cafe_otel._privacy.shapes",
    "float_shape": "cafe_otel._privacy.shapes",
    "int_shape": "cafe_otel._privacy.shapes",
    "text_shape": "cafe_otel._privacy.shapes",
    "execute_tool": "cafe_otel.agent",
    "invoke_agent": "cafe_otel.agent",
}
__all__ = [
    "GENAI_SEMCONV_VERSION",
    "SCHEMA_URL",
    "AdvancedOptions",
    "BatchOptions",
    "BoundedBatchSpanProcessor",
    "CaptureMode",
    "FailSoftSpanExporter",
    "MetadataOnlySpanProcessor",
    "MetricsListener",
    "MetricsOptions",
    "OTelTracer",
    "SequentialIdGenerator",
    "Shape",
    "SpanListener",
    "TelemetryAccount",
    "TelemetryConfigError",
    "TelemetryHandle",
    "bool_shape",
    "capture_mode",
    "configure",
    "describe",
    "diff",
    "encode",
    "execute_tool",
    "export_recording",
    "float_shape",
    "int_shape",
    "invoke_agent",
    "resolve_settings",
    "sanitise_span",
    "text_shape",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cafe_otel' has no attribute {name!r}")
    from cafe_otel._config.environment import import_sdk

    import_sdk()  # a span limit the SDK reads on import is a named error, not a bare ValueError
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # found once; later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
