"""`MergingMetricReader`: the MeterProvider's metrics and our in-process streams, one export.

A `MetricReader` (the SDK's own abstract interface) that exports every `export_interval`,
at `force_flush` and once more at shutdown, as the SDK's periodic reader does. Each time it
collects what the MeterProvider aggregated (anyone's instruments on `handle.meter_provider`)
and adds our streams (`cafe_otel._metrics.aggregation`) under our instrumentation scope, in the
temporality the exporter prefers, so the exporter sees one `MetricsData`. Exports never
overlap (the specification's rule for `MetricExporter.export`), and are made with
instrumentation suppressed, so an instrumented HTTP client does not trace our own exports.

A collection the SDK has nothing for still exports our streams: a shift whose only metrics
are its model calls' histograms is not left out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value
from opentelemetry.sdk.metrics import Counter, Histogram
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    MetricExporter,
    MetricExportResult,
    MetricReader,
    MetricsData,
    ResourceMetrics,
    ScopeMetrics,
)
from opentelemetry.sdk.resources import Resource

from cafe.trace import FailureReport, fail_soft
from cafe_otel._metrics.aggregation import COUNTER, HISTOGRAM, InProcessMetrics


def merged(collected: MetricsData | None, ours: InProcessMetrics, found: list[Any],
           resource: Resource) -> MetricsData | None:
    """`collected` with `found` (our streams' `Metric`s) added under our scope."""
    if not found:
        return collected
    if collected is None or not collected.resource_metrics:
        return MetricsData([ResourceMetrics(resource, [ScopeMetrics(ours.scope, found, ours.scope.schema_url or "")],
                                            resource.schema_url)])
    first, *rest = collected.resource_metrics
    scopes = list(first.scope_metrics)
    for index, scope_metrics in enumerate(scopes):
        if scope_metrics.scope == ours.scope:
            scopes[index] = ScopeMetrics(scope_metrics.scope, [*scope_metrics.metrics, *found],
                                         scope_metrics.schema_url)
            break
    else:
        scopes.append(ScopeMetrics(ours.scope, found, ours.scope.schema_url or ""))
    return MetricsData([ResourceMetrics(first.resource, scopes, first.schema_url), *rest])


class MergingMetricReader(MetricReader):
    def __init__(self, exporter: MetricExporter, ours: InProcessMetrics, *, resource: Resource,
                 export_interval: float, export_timeout: float,
                 on_failure: Callable[[FailureReport], None] | None = None) -> None:
        """`export_interval` and `export_timeout` in seconds; `on_failure` hears of a
        collection that raised (the exporter's own failures are the exporter's to count)."""
        super().__init__(preferred_temporality=exporter._preferred_temporality,
                         preferred_aggregation=exporter._preferred_aggregation)
        self._exporter = exporter
        preferred = exporter._preferred_temporality or {}
        self._temporalities = {kind: preferred.get(instrument, AggregationTemporality.CUMULATIVE)
                               for kind, instrument in ((HISTOGRAM, Histogram), (COUNTER, Counter))}
        self._ours = ours
        self._on_failure = on_failure
        self._resource = resource
        self._interval = export_interval
        self._timeout_millis = export_timeout * 1000
        self._exporting = threading.Lock()  # one collection and export at a time
        self._received: MetricsData | None = None
        self._stop = threading.Event()
        self._shut = False
        self._thread = threading.Thread(target=self._tick, name="cafe-otel-metrics-reader", daemon=True)
        self._thread.start()

    def _temporality(self, kind: str) -> AggregationTemporality:
        # The exporter's preference for the SDK instrument of that kind (cumulative unless
        # it says otherwise, as for the SDK's own instruments).
        return self._temporalities[kind]

    def _receive_metrics(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> None:
        self._received = metrics_data  # exported by _export, with ours

    def _export(self, timeout_millis: float) -> bool:
        with self._exporting:
            self._received = None
            self.collect(timeout_millis=timeout_millis)
            data = merged(self._received, self._ours, self._ours.collect(self._temporality), self._resource)
            self._received = None
            if data is None:
                return True
            token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
            try:
                return self._exporter.export(data, timeout_millis=timeout_millis) is MetricExportResult.SUCCESS
            finally:
                detach(token)

    def _export_soft(self, timeout_millis: float, where: str) -> bool:
        # The boundary: a collection that raised is reported, never raised into the
        # caller (a flush, a shutdown at exit) nor allowed to end the periodic thread.
        exported: list[bool] = []
        report = fail_soft(lambda: exported.append(self._export(timeout_millis)), where)
        if report is not None and self._on_failure is not None:
            self._on_failure(report)
        return exported == [True]

    def _tick(self) -> None:
        while not self._stop.wait(self._interval):
            self._export_soft(self._timeout_millis, "metrics collection")

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        exported = self._export_soft(timeout_millis, "metrics flush")
        return self._exporter.force_flush(timeout_millis) and exported

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        if self._shut:
            return
        self._shut = True
        deadline = time.monotonic() + timeout_millis / 1000
        self._stop.set()
        self._thread.join(max(deadline - time.monotonic(), 0.0))
        self._export_soft(max(deadline - time.monotonic(), 0.0) * 1000, "final metrics collection")
        self._exporter.shutdown(timeout_millis=max(deadline - time.monotonic(), 0.0) * 1000)
