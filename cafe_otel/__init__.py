"""cafe_otel: the café harness's spans as OpenTelemetry GenAI spans (semconv 1.41.1).

Metadata-only by default, with a fail-soft, bounded export boundary. Importing this
package has no side effects: nothing global is set on import; `configure()` returns a handle
(and makes its providers the global ones unless told not to).
"""

# First: it checks the span limit variables the SDK reads when it is imported (see there).
from cafe_otel import _environment  # noqa: F401
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
