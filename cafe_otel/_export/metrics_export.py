"""The metrics pipeline: a MeterProvider whose exports go through cafe's fail-soft boundary.

`FailSoftMetricExporter` wraps the OTLP metric exporter behind the SDK's `MetricExporter`
interface: an export never raises and never outlasts its bound, and every data point handed
to it is settled in the account as exported or dropped with a cause (`timeout`, `busy`,
`failure`, the exception's class name), under the SDK's own self-observability name
`otel.sdk.exporter.metric_data_point.exported`, or, for a final export still in flight at
shutdown's deadline, by what its attempts at the transport say (`cafe_otel._export.attempts`):
unconfirmed while one may yet be stored, dropped when every attempt delivered nothing.
The reader (`MergingMetricReader`) exports every `export_interval` what the MeterProvider
holds and our own streams (`InProcessMetrics`, which the handle's `MetricsListener` records
into); at shutdown the handle gives the exporter a deadline, so the final export (a shift
shorter than the interval has only that one) is bounded like the spans'.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData, ResourceMetrics
from opentelemetry.sdk.resources import Resource

from cafe.trace.failsoft import TIMEOUT, FailSoft
from cafe_otel._config.metrics import MetricSettings
from cafe_otel._export.account import REJECTED, SHUTDOWN_TIMEOUT, TelemetryAccount
from cafe_otel._export.attempts import AttemptLog, InFlight
from cafe_otel._export.failsoft import GRACE_SECONDS
from cafe_otel._export.otlp import export_target
from cafe_otel._export.partial_success import refusal_status, rejected_count
from cafe_otel._metrics.aggregation import InProcessMetrics
from cafe_otel._metrics.reader import MergingMetricReader
from cafe_otel._privacy.resource import ResourceGuard


def count_points(data: MetricsData) -> int:
    return sum(
        len(metric.data.data_points)
        for resource_metrics in data.resource_metrics
        for scope_metrics in resource_metrics.scope_metrics
        for metric in scope_metrics.metrics
    )


class FailSoftMetricExporter(MetricExporter):
    def __init__(self, inner: MetricExporter, *, account: TelemetryAccount, export_timeout: float,
                 target: str = "metrics exporter", rejected: Callable[[], int] | None = None,
                 refused: Callable[[], int | None] | None = None, attempts: AttemptLog | None = None) -> None:
        # `rejected`: after an export the exporter called a success, how many of its points
        # the receiver rejected (OTLP partial success, `cafe_otel._export.partial_success`); `refused`:
        # the status of an answer that was not 2xx (a redirect), when the exporter called it a success;
        # `attempts`: the inner exporter's attempts at the transport.
        super().__init__(preferred_temporality=inner._preferred_temporality,
                         preferred_aggregation=inner._preferred_aggregation)
        self.inner = inner
        self.account = account
        self.export_timeout = export_timeout
        self._target = target
        self._rejected = rejected
        self._refused = refused
        self._attempts = attempts
        self._exports = FailSoft(export_timeout + GRACE_SECONDS, name="cafe-otel-metrics-export")
        self._control = FailSoft(export_timeout, exclusive=False, name="cafe-otel-metrics-control")
        self._deadline: float | None = None  # time.monotonic() by which everything must be done
        self._settled = threading.Condition()
        self._in_flight = 0
        self._resources = ResourceGuard()  # the operator's resource, without a secret pasted in it

    def add_secrets(self, secrets: Sequence[str]) -> None:
        """Values (a live client's key) no exported resource may hold."""
        self._resources.add_secrets(secrets)

    def _without_secrets(self, metrics_data: MetricsData) -> MetricsData:
        cleaned = [(found, self._resources(found.resource)) for found in metrics_data.resource_metrics]
        if all(clean is found.resource for found, clean in cleaned):
            return metrics_data
        self.account.add_withheld("resource")
        return MetricsData(resource_metrics=[
            found if clean is found.resource else ResourceMetrics(clean, found.scope_metrics, found.schema_url)
            for found, clean in cleaned])

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
        metrics_data = self._without_secrets(metrics_data)
        wanted = min(self.export_timeout, timeout_millis / 1000)
        # Before shutdown the inner exporter gets a little grace to answer in time (as the
        # spans' exporter does); under a deadline, the deadline is the bound for both.
        inner_bound, wait = ((wanted, wanted + GRACE_SECONDS) if self._deadline is None
                             else (self._bound(wanted), self._bound(wanted)))
        # What an earlier export's late answer reported belongs to no export now.
        self._rejected_count(0)
        self._refusal()
        outcome = self._exports.call(
            lambda: self._attempted(lambda: self.inner.export(metrics_data, timeout_millis=inner_bound * 1000)),
            timeout=wait)
        succeeded = outcome.ok and outcome.value is MetricExportResult.SUCCESS
        refusal = self._refusal() if succeeded else None
        if refusal is not None:
            self.account.add_metric_points_dropped(
                points, f"metrics export to {self._target}: the receiver answered {refusal}, not 2xx; "
                        "nothing was delivered", str(refusal))
            return MetricExportResult.FAILURE
        if outcome.error_type == TIMEOUT and self._deadline is not None and wait < wanted:
            # Cut short by shutdown's deadline, not by the export's own bound.
            if self._settle_in_flight(points) is not InFlight.DELIVERED:
                return MetricExportResult.FAILURE
            succeeded = True
        if succeeded:
            rejected = self._rejected_count(points)
            self.account.add_metric_points_exported(points - rejected)
            if rejected:
                self.account.add_metric_points_dropped(
                    rejected, f"metrics export to {self._target}: the receiver took the request but rejected "
                              f"{rejected} of its {points} data points (OTLP partial success)", REJECTED)
            return MetricExportResult.SUCCESS
        cause = outcome.error_type or "failure"
        self.account.add_metric_points_dropped(
            points, f"metrics export to {self._target}: {outcome.why or 'the exporter returned FAILURE'}", cause)
        return MetricExportResult.FAILURE

    def _attempted(self, export: Callable[[], MetricExportResult]) -> MetricExportResult:
        # On the thread that runs the export, so an export not attempted (busy) counts none.
        if self._attempts is not None:
            self._attempts.start_export()
        return export()

    def _settle_in_flight(self, points: int) -> InFlight:
        """Count an export that has not returned by shutdown's deadline by what its attempts
        say; `DELIVERED` is left to the caller, to count as a success."""
        why = "shutdown's bound ran out"
        if self._attempts is None or not self._attempts.attached:  # nothing seen: no answer is not a loss
            self.account.add_metric_points_unconfirmed(
                points, f"a metrics export to {self._target} was still in flight when {why}")
            return InFlight.UNCONFIRMED
        attempts = self._attempts.withdraw()  # no attempt of it leaves after this verdict
        verdict = attempts.in_flight()
        if verdict is InFlight.DROPPED and attempts.last is not None:
            self.account.add_metric_points_dropped(
                points, f"metrics export to {self._target}: not delivered before exit; every attempt failed "
                        f"before reaching a receiver (last: {attempts.last.kind}) and the exporter was waiting "
                        f"to retry when {why}", attempts.last.kind)
        elif verdict is InFlight.UNSENT:
            self.account.add_metric_points_dropped(
                points, f"metrics export to {self._target}: not sent before exit; no attempt had started when "
                        f"{why}", SHUTDOWN_TIMEOUT)
        elif verdict is InFlight.UNCONFIRMED:
            self.account.add_metric_points_unconfirmed(
                points, f"a metrics export to {self._target} was still in flight when {why}: "
                        f"{attempts.why_unconfirmed()}")
        return verdict

    def _rejected_count(self, sent: int) -> int:
        return rejected_count(self._rejected, sent, self.account.note_error, f"metrics export to {self._target}")

    def _refusal(self) -> int | None:
        return refusal_status(self._refused, self.account.note_error, f"metrics export to {self._target}")

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        outcome = self._control.call(lambda: self.inner.force_flush(timeout_millis),
                                     timeout=self._bound(timeout_millis / 1000))
        return outcome.ok and outcome.value is not False

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: object) -> None:
        self._control.call(lambda: self.inner.shutdown(timeout_millis=timeout_millis),
                           timeout=self._bound(min(timeout_millis / 1000, self.export_timeout)))


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
) -> tuple[MeterProvider, FailSoftMetricExporter]:
    target = export_target(metric_settings.exporter) if not explicit_exporter else type(inner).__name__
    exporter = FailSoftMetricExporter(inner, account=account, export_timeout=metric_settings.export_timeout,
                                      target=target, rejected=rejected, refused=refused, attempts=attempts)
    reader = MergingMetricReader(exporter, ours, resource=resource, export_interval=metric_settings.export_interval,
                                 export_timeout=metric_settings.export_timeout,
                                 on_failure=lambda report: account.add_mirror_error(str(report)))
    provider = MeterProvider(
        metric_readers=[reader],
        resource=resource,
        # Explicit, so os.environ is not read for it; and an exemplar would tie a metric point
        # to a trace id, which is not metadata a metric needs (and costs a context read a record).
        exemplar_filter=AlwaysOffExemplarFilter(),
        shutdown_on_exit=True,
    )
    return provider, exporter
