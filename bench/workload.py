"""Figure 1's workload, shared by its timed runs (`bench.overhead`) and its instruction counts
(`bench.instructions`): a local model that answers at once, the synthetic mid-shift call it
answers, and the pipeline both measure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from bench.nothing import NothingExporter, NothingMetricExporter
from bench.synthetic import synthetic_calls
from cafe.counter.clients.tracing import TracingClient

START_KEYS = ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model")


class KeepingExporter(NothingExporter):
    def __init__(self) -> None:
        super().__init__()
        self.kept: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.kept.extend(spans)
        return super().export(spans)


class InstantClient:
    """A local model that answers at once with a fixed response."""

    model = "gpt-4o-mini-2024-07-18"
    provider = "openai"

    def __init__(self, response: dict[str, Any]) -> None:
        self.response = response
        self.calls = 0

    def chat(self, messages, tools=None, temperature=0.0, tool_choice=None):
        self.calls += 1
        return self.response


class InstantNetworkClient(InstantClient):
    """The same, reporting a network endpoint as a live client does."""

    server_address = "api.openai.com"
    server_port = 443


def _call():
    # The second call of the synthetic session: system, user, assistant tool calls, two tool
    # results; a realistic mid-shift request.
    return synthetic_calls(2)[1]


def _configure(capture: bool, exporter: SpanExporter, metadata_only: bool = True, metrics: bool = False):
    import cafe_otel

    return cafe_otel.configure(
        "bench", exporter=exporter, capture_content="SPAN_ONLY" if capture else "NO_CONTENT",
        environ={}, batch=cafe_otel.BatchOptions(max_queue_size=2048),
        advanced=cafe_otel.AdvancedOptions(metadata_only=metadata_only),
        # Collected never during the run: what is timed is the recording, as on a live shift.
        metrics=cafe_otel.MetricsOptions(exporter=NothingMetricExporter(), export_interval=3600) if metrics else False,
    )


def exported_shape(capture: bool = False) -> tuple[str, Any, dict[str, Any], dict[str, Any]]:
    """(name, kind, start attributes, end attributes) of the span our path exports."""
    call = _call()
    keeper = KeepingExporter()
    handle = _configure(capture, keeper)
    client = TracingClient(InstantClient(call.response), handle.tracer())
    client.chat(call.messages, call.tools, call.temperature)
    handle.shutdown(5.0)
    (span,) = keeper.kept
    attributes = dict(span.attributes or {})
    start = {k: v for k, v in attributes.items() if k in START_KEYS}
    end = {k: v for k, v in attributes.items() if k not in START_KEYS}
    return span.name, span.kind, start, end
