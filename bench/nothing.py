"""A span exporter that accepts every batch, counts its spans and does nothing else.

Imports the OpenTelemetry SDK only, nothing of cafe: figure 9 runs it inside the peers' own
virtualenvs, where cafe's dependencies are not installed.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


class NothingExporter(SpanExporter):
    """Accepts every batch and does nothing with it."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


class NothingMetricExporter(MetricExporter):
    """Accepts every metrics export and does nothing with it."""

    def __init__(self) -> None:
        super().__init__()
        self.exports = 0

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: object) -> MetricExportResult:
        self.exports += 1
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: object) -> None:
        return None
