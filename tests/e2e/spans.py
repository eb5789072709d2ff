"""Plain-SDK spans, for the one thing cafe_otel would never send: canary text under keys
on no allowlist (resource, scope, span event, span content attribute).

The end-to-end tests' span source is cafe_otel (shifts.py). `emit_spans` is kept only
to show the Collector's own redaction of such keys, and for the control that sends the
same canary straight to Jaeger, where it shows up. It builds small trees shaped like a
cafe shift (GenAI semantic conventions 1.41.1) with the OTLP/gRPC exporter.
"""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

SCHEMA_URL = "https://opentelemetry.io/schemas/1.41.1"
AGENT = "cafe"
MODEL = "test-model"
TOOL = "lookup_menu"
# One trace = an agent run with one model call and one tool call.
SPAN_NAMES = (f"invoke_agent {AGENT}", f"chat {MODEL}", f"execute_tool {TOOL}")
SPANS_PER_TRACE = len(SPAN_NAMES)
# Attributes the collector's redaction allowlist must let through.
ALLOWED_KEYS = (
    "gen_ai.operation.name",
    "gen_ai.request.model",
    "gen_ai.usage.input_tokens",
    "gen_ai.tool.name",
    "cafe.turn",
)


def emit_spans(
    endpoint: str, service: str, n_traces: int, *, canary: str | None = None, timeout: float = 10.0
) -> list[str]:
    """Send `n_traces` shift-shaped traces to an OTLP/gRPC `endpoint` (host:port).

    Exported in one call per 100 spans, each checked: when this returns, the
    receiver has accepted every span (a failure raises). With `canary`, the text
    is put in places the collector must strip: a content attribute on a span, a
    span event attribute, a resource attribute and a scope attribute.
    Returns the trace ids (32 hex digits) in emission order.
    """
    sink = InMemorySpanExporter()
    resource = {"service.name": service, "service.version": "e2e"}
    if canary:
        resource["customer.note"] = canary
    provider = TracerProvider(resource=Resource(resource))
    provider.add_span_processor(SimpleSpanProcessor(sink))
    tracer = provider.get_tracer(
        "cafe-e2e", "0", schema_url=SCHEMA_URL, attributes={"scope.note": canary} if canary else None
    )
    trace_ids = []
    for turn in range(n_traces):
        common = {"gen_ai.provider.name": "test", "cafe.turn": turn}
        with tracer.start_as_current_span(
            SPAN_NAMES[0],
            kind=SpanKind.INTERNAL,
            attributes={**common, "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT},
        ) as root:
            trace_ids.append(format(root.get_span_context().trace_id, "032x"))
            chat_attrs = {
                **common,
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": MODEL,
                "gen_ai.usage.input_tokens": 12,
                "gen_ai.usage.output_tokens": 3,
                "gen_ai.response.finish_reasons": ["tool_call"],
            }
            if canary:
                chat_attrs["gen_ai.input.messages"] = f'[{{"role":"user","content":"{canary}"}}]'
            with tracer.start_as_current_span(SPAN_NAMES[1], kind=SpanKind.CLIENT, attributes=chat_attrs) as chat:
                if canary:
                    chat.add_event("gen_ai.client.inference.operation.details", {"gen_ai.output.messages": canary})
            with tracer.start_as_current_span(
                SPAN_NAMES[2],
                kind=SpanKind.INTERNAL,
                attributes={
                    **common,
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": TOOL,
                    "gen_ai.tool.call.id": f"call-{turn}",
                    "cafe.tool.status": "ok",
                },
            ):
                pass
    spans = sink.get_finished_spans()
    exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True, timeout=timeout)
    try:
        for start in range(0, len(spans), 100):
            result = exporter.export(spans[start : start + 100])
            if result is not SpanExportResult.SUCCESS:
                raise RuntimeError(f"collector at {endpoint} did not accept spans {start}..{start + 99}")
    finally:
        exporter.shutdown()
        provider.shutdown()
    return trace_ids
