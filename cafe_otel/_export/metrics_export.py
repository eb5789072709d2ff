"""The metrics pipeline: a MeterProvider whose exports go through cafe's fail-soft boundary.

`FailSoftMetricExporter` wraps the OTLP metric exporter behind the SDK's `MetricExporter`
interface: an export never raises and never outlasts its bound, and every data point handed
to it is settled in the account as exported or dropped with a cause (`timeout`, `busy`,
`failure`, the exception's class name), under the SDK's own self-observability name
`otel.sdk.exporter.metric_data_point.exported`, or, for a final export still in flight at
shutdown's deadline, by what its attempts at the transport say (`cafe_otel._export.attempts`):
unconfirmed while one may yet be stored, dropped when every attempt delivered nothing.
Before anything is encoded, every export's points pass `MetricsSanitiser` (the same
allowlist, shapes and secret checks as a span's, `cafe_otel._privacy.metrics`): anyone's
instruments share the provider, and the SDK aggregates them under the attributes they were
given. The reader (`MergingMetricReader`) exports every `export_interval` what the MeterProvider
holds and our own streams (`InProcessMetrics`, which the handle's `MetricsListener` records
into); at shutdown the handle gives the exporter a deadline, so the final export (a shift
shorter than the interval has only that one) is bounded like the spans'.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.resources import Resource

from cafe.trace import TIMEOUT
from cafe_otel._config.metrics import MetricSettings
from cafe_otel._export.account import EXPORTED, REDACTION_FAILED, TelemetryAccount
from cafe_otel._export.attempts import AttemptLog, InFlight
from cafe_otel._export.failsoft import GRACE_SECONDS, ExportBoundary
from cafe_otel._export.otlp import export_target
from cafe_otel._export.settle import Settler
from cafe_otel._metrics.aggregation import InProcessMetrics
from cafe_otel._metrics.reader import MergingMetricReader
from cafe_otel._privacy.metrics import MetricsSanitiser


def count_points(data: MetricsData) -> int:
    return sum(
        len(metric.data.data_points)
        for resource_metrics in data.resource_metrics
        for scope_metrics in resource_metrics.scope_metrics
        for metric in scope_metrics.metrics
    )


class FailSoftMetricExporter(MetricExporter):
    """A `MetricExporter` that never raises and never outlasts its bound, wrapping any other,
    and settles every data point handed to it in `account` (the settle step the spans' batch
    processor uses, `cafe_otel._export.settle`)."""

    def __init__(self, inner: MetricExporter, *, account: TelemetryAccount, export_timeout: float,
                 target: str = "metrics exporter", rejected: Callable[[], int] | None = None,
                 refused: Callable[[], int | None] | None = None, attempts: AttemptLog | None = None,
                 sanitiser: MetricsSanitiser | None = None) -> None:
        # `rejected`, `refused` and `attempts` are the settle step's (`Settler`); `sanitiser`
        # checks every point before it is exported (by default with the span allowlist).
        super().__init__(preferred_temporality=inner._preferred_temporality,
                         preferred_aggregation=inner._preferred_aggregation)
        self.inner = inner
        self.account = account
        self.export_timeout = export_timeout
        self._target = target
        self._boundary = ExportBoundary(export_timeout, attempts=attempts, name="cafe-otel-metrics")
        self._settler = Settler("metrics", account, target, rejected=rejected, refused=refused, attempts=attempts)
        self._deadline: float | None = None  # time.monotonic() by which everything must be done
        self._settled = threading.Condition()
        self._in_flight = 0
        self._sanitiser = sanitiser if sanitiser is not None else MetricsSanitiser(account=account)

    def add_secrets(self, secrets: Sequence[str]) -> None:
        """Values (a live client's key) no exported point, scope or resource may hold."""
        self._sanitiser.add_secrets(secrets)

    def close_by(self, deadline: float) -> None:
        """From now on no call outlasts `deadline` (a `time.monotonic()` reading)."""
        self._deadline = deadline

    def wait_settled(self, timeout: float) -> bool:
        """Wait until no export is in flight (its points are in the account), at most `timeout` s."""
        with self._settled:
            return self._settled.wait_for(lambda: self._in_flight == 0, timeout=max(timeout, 0.0))

    def _bound(self, wanted: float) -> float:
        if self._deadline is None:
            return wanted
        return max(min(wanted, self._deadline - time.monotonic()), 0.0)

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: object) -> MetricExportResult:
        points = count_points(metrics_data)
        if points == 0:
            return MetricExportResult.SUCCESS
        with self._settled:
            self._in_flight += 1
        try:
            return self._export(metrics_data, points, timeout_millis)
        finally:
            with self._settled:
                self._in_flight -= 1
                self._settled.notify_all()

    def _export(self, metrics_data: MetricsData, points: int, timeout_millis: float) -> MetricExportResult:
        try:
            metrics_data, left_out = self._sanitiser.check(metrics_data)
        except Exception as error:  # fail closed: what could not be checked is not sent
            self.account.add("metrics", EXPORTED, points, REDACTION_FAILED,
                             f"checking metric points raised {type(error).__name__}; points dropped")
            return MetricExportResult.FAILURE
        # A point merged into another (their attributes became the same) is settled with it;
        # one left out with its metric (a name holding a secret) is counted as withheld only.
        points -= left_out
        if points <= 0:
            return MetricExportResult.SUCCESS
        wanted = min(self.export_timeout, timeout_millis / 1000)
        # Before shutdown the inner exporter gets a little grace to answer in time (as the
        # spans' exporter does); under a deadline, the deadline is the bound for both.
        inner_bound, wait = ((wanted, wanted + GRACE_SECONDS) if self._deadline is None
                             else (self._bound(wanted), self._bound(wanted)))
        pending = self._settler.pending(points)
        self._settler.forget_stale()
        outcome = self._boundary.export(
            lambda: self.inner.export(metrics_data, timeout_millis=inner_bound * 1000), timeout=wait)
        if outcome.error_type == TIMEOUT and self._deadline is not None and wait < wanted:
            # Cut short by shutdown's deadline, not by the export's own bound.
            verdict = self._settler.settle_in_flight(pending, "shutdown's bound ran out")
            return MetricExportResult.SUCCESS if verdict is InFlight.DELIVERED else MetricExportResult.FAILURE
        delivered = self._settler.settle(pending, outcome, waited=wanted)
        return MetricExportResult.SUCCESS if delivered else MetricExportResult.FAILURE

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        outcome = self._boundary.control(lambda: self.inner.force_flush(timeout_millis),
                                         timeout=self._bound(timeout_millis / 1000))
        if not outcome.ok:
            self.account.note_error(f"force_flush of {self._target}: {outcome.why}")
        return outcome.ok and outcome.value is not False

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: object) -> None:
        if not self._boundary.close():
            return
        outcome = self._boundary.control(lambda: self.inner.shutdown(timeout_millis=timeout_millis),
                                         timeout=self._bound(min(timeout_millis / 1000, self.export_timeout)))
        if not outcome.ok:
            self.account.note_error(f"shutdown of {self._target}: {outcome.why}")


def build_meter_provider(
    metric_settings: MetricSettings,
    *,
    resource: Resource,
    account: TelemetryAccount,
    inner: MetricExporter,
    explicit_exporter: bool,
    ours: InProcessMetrics,
    rejected: Callable[[], int] | None = None,
    refused: Callable[[], int | None] | None = None,
    attempts: AttemptLog | None = None,
    sanitiser: MetricsSanitiser | None = None,
) -> tuple[MeterProvider, FailSoftMetricExporter]:
    target = export_target(metric_settings.exporter) if not explicit_exporter else type(inner).__name__
    exporter = FailSoftMetricExporter(inner, account=account, export_timeout=metric_settings.export_timeout,
                                      target=target, rejected=rejected, refused=refused, attempts=attempts,
                                      sanitiser=sanitiser)
    reader = MergingMetricReader(exporter, ours, resource=resource, export_interval=metric_settings.export_interval,
                                 export_timeout=metric_settings.export_timeout,
                                 on_failure=lambda report: account.add_listener_error(str(report)))
    provider = MeterProvider(
        metric_readers=[reader],
        resource=resource,
        # Explicit, so os.environ is not read for it; and an exemplar would tie a metric point
        # to a trace id, which is not metadata a metric needs (and costs a context read a record).
        exemplar_filter=AlwaysOffExemplarFilter(),
        shutdown_on_exit=True,
    )
    return provider, exporter
