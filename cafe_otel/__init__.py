"""cafe_otel: the café harness's spans as OpenTelemetry GenAI spans (semconv 1.41.1).

Metadata-only by default, with a fail-soft, bounded export boundary. Importing this
package has no side effects and reads no environment: nothing global is set, the SDK is
imported when a name below is first used, and `configure()` returns a handle (and makes its
providers the global ones unless told not to).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cafe_otel.account import TelemetryAccount
    from cafe_otel.agent import execute_tool, invoke_agent
    from cafe_otel.batch import BoundedBatchSpanProcessor
    from cafe_otel.configure import TelemetryHandle, configure
    from cafe_otel.content import CaptureMode, capture_mode
    from cafe_otel.failsoft import FailSoftSpanExporter
    from cafe_otel.ids import SequentialIdGenerator
    from cafe_otel.metadata_processor import MetadataOnlySpanProcessor, sanitise_span
    from cafe_otel.metrics_listener import MetricsListener
    from cafe_otel.otlp import describe, diff, encode
    from cafe_otel.recording_export import export_recording
    from cafe_otel.semconv import GENAI_SEMCONV_VERSION, SCHEMA_URL
    from cafe_otel.settings import TelemetryConfigError, resolve_settings
    from cafe_otel.shapes import Shape, bool_shape, float_shape, int_shape, text_shape
    from cafe_otel.span_listener import SpanListener
    from cafe_otel.tracer import OTelTracer

_EXPORTS = {
    "GENAI_SEMCONV_VERSION": "cafe_otel.semconv",
    "SCHEMA_URL": "cafe_otel.semconv",
    "BoundedBatchSpanProcessor": "cafe_otel.batch",
    "CaptureMode": "cafe_otel.content",
    "FailSoftSpanExporter": "cafe_otel.failsoft",
    "MetadataOnlySpanProcessor": "cafe_otel.metadata_processor",
    "MetricsListener": "cafe_otel.metrics_listener",
    "OTelTracer": "cafe_otel.tracer",
    "SequentialIdGenerator": "cafe_otel.ids",
    "SpanListener": "cafe_otel.span_listener",
    "TelemetryAccount": "cafe_otel.account",
    "TelemetryConfigError": "cafe_otel.settings",
    "TelemetryHandle": "cafe_otel.configure",
    "capture_mode": "cafe_otel.content",
    "configure": "cafe_otel.configure",
    "describe": "cafe_otel.otlp",
    "diff": "cafe_otel.otlp",
    "encode": "cafe_otel.otlp",
    "export_recording": "cafe_otel.recording_export",
    "resolve_settings": "cafe_otel.settings",
    "sanitise_span": "cafe_otel.metadata_processor",
    "Shape": "cafe_otel.shapes",
    "bool_shape": "cafe_otel.shapes",
    "float_shape": "cafe_otel.shapes",
    "int_shape": "cafe_otel.shapes",
    "text_shape": "cafe_otel.shapes",
    "execute_tool": "cafe_otel.agent",
    "invoke_agent": "cafe_otel.agent",
}
__all__ = [
    "GENAI_SEMCONV_VERSION",
    "SCHEMA_URL",
    "BoundedBatchSpanProcessor",
    "CaptureMode",
    "FailSoftSpanExporter",
    "MetadataOnlySpanProcessor",
    "MetricsListener",
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
    from cafe_otel._environment import import_sdk

    import_sdk()  # a span limit the SDK reads on import is a named error, not a bare ValueError
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # found once; later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Face(types.ModuleType):
    """The package's face keeps `configure` the function: importing the submodule of the
    same name (`cafe_otel.configure`) would otherwise bind the module in its place."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Face
