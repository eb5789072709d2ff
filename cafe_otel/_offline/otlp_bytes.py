"""Deterministic OTLP bytes for an ordered list of finished spans, and a readable diff.

A batch processor's batches depend on timing, so a golden file is encoded from an
ordered list of finished spans (e.g. an InMemorySpanExporter's), never from a batch.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.trace import ReadableSpan


def encode(spans: Sequence[ReadableSpan]) -> bytes:
    """OTLP protobuf (ExportTraceServiceRequest) bytes, map order fixed."""
    return encode_spans(list(spans)).SerializeToString(deterministic=True)


def _value(value: AnyValue) -> str:
    kind = value.WhichOneof("value")
    if kind is None:
        return "null"
    if kind == "array_value":
        return "[" + ", ".join(_value(v) for v in value.array_value.values) + "]"
    if kind == "kvlist_value":
        return "{" + ", ".join(f"{kv.key}={_value(kv.value)}" for kv in value.kvlist_value.values) + "}"
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return repr(getattr(value, kind))


def describe(data: bytes) -> list[str]:
    """One block of text lines per span (resource and scope first), stable and diffable."""
    request = ExportTraceServiceRequest.FromString(data)
    lines: list[str] = []
    for resource_spans in request.resource_spans:
        attrs = ", ".join(f"{kv.key}={_value(kv.value)}" for kv in resource_spans.resource.attributes)
        lines.append(f"resource {attrs} schema={resource_spans.schema_url}")
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope
            lines.append(f"  scope {scope.name} {scope.version} schema={scope_spans.schema_url}")
            for span in scope_spans.spans:
                lines.append(
                    f"    span {span.name!r} kind={span.kind} trace={span.trace_id.hex()} "
                    f"id={span.span_id.hex()} parent={span.parent_span_id.hex() or '-'} "
                    f"start={span.start_time_unix_nano} end={span.end_time_unix_nano} "
                    f"status={span.status.code}"
                )
                for kv in span.attributes:
                    lines.append(f"      {kv.key} = {_value(kv.value)}")
                for event in span.events:
                    event_attrs = ", ".join(f"{kv.key}={_value(kv.value)}" for kv in event.attributes)
                    lines.append(f"      event {event.name} t={event.time_unix_nano} {event_attrs}")
    return lines


def diff(expected: bytes, actual: bytes, *, names: tuple[str, str] = ("expected", "actual")) -> str:
    """A unified diff of the two encodings' readable forms; empty when the bytes agree."""
    if expected == actual:
        return ""
    lines = list(difflib.unified_diff(describe(expected), describe(actual), *names, lineterm=""))
    return "\n".join(lines) if lines else "the encodings differ in bytes but not in any described field"
