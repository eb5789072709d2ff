"""A span exporter that accepts every batch, counts its spans and does nothing else.

Imports the OpenTelemetry SDK only, nothing of cafe: figure 9 runs it inside the peers' own
virtualenvs, where cafe's dependencies are not installed.
"""

from __future__ import annotations

from collections.abc import Sequence

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
