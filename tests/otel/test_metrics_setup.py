"""configure()'s MeterProvider: OTEL_* settings, the fail-soft boundary, one account, bounded shutdown."""

from __future__ import annotations

import threading
import time

import pytest
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cafe import counter
from cafe_otel import BatchOptions, MetricsOptions, TelemetryConfigError, configure
from cafe_otel._config.metrics import resolve_metric_settings
from cafe_otel._config.settings import resolve_settings
from cafe_otel._export.metrics_export import count_points
from tests.timing import SCHEDULING_SLACK


class Metrics(MetricExporter):
    """Keeps every export; `behaviour` says what an export does: ok, fail, raise or hang."""

    def __init__(self, behaviour: str = "ok") -> None:
        super().__init__()
        self.behaviour = behaviour
        self.exports: list[int] = []
        self.release = threading.Event()

    def export(self, metrics_data, timeout_millis: float = 10_000, **kwargs) -> MetricExportResult:
        self.exports.append(count_points(metrics_data))
        if self.behaviour == "raise":
            raise ConnectionError("the collector at http://user:pw@host said no")
        if self.behaviour == "hang":
            self.release.wait(30)
        return MetricExportResult.FAILURE if self.behaviour == "fail" else MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs) -> None:
        return None


def _shift(handle) -> counter.ShiftRun:
    return counter.run_shift(counter.ScriptedClient(), list(counter.DEFAULT_SCRIPT), counter.make_responder([]),
                          tracer=handle.tracer())


def test_metrics_are_exported_once_at_shutdown_and_counted():
    metrics = Metrics()
    handle = configure(exporter=InMemorySpanExporter(), environ={}, metrics=MetricsOptions(exporter=metrics))
    _shift(handle)
    handle.shutdown()
    assert metrics.exports == [7]  # the order is rejected: 4 calls
    assert handle.account.summary() == "14 spans exported, 0 dropped; 7 metric points exported, 0 dropped"


EXPORTED, INFLIGHT = "otel.sdk.exporter.metric_data_point.exported", "otel.sdk.exporter.metric_data_point.inflight"


@pytest.mark.parametrize(("behaviour", "point"), [("fail", (EXPORTED, "failure")),
                                                  ("raise", (EXPORTED, "ConnectionError")),
                                                  ("hang", (INFLIGHT, None))])  # no answer yet: unconfirmed
def test_a_failing_metrics_exporter_costs_nothing_and_is_counted_by_cause(behaviour, point):
    metrics = Metrics(behaviour)
    handle = configure(exporter=InMemorySpanExporter(), environ={}, batch=BatchOptions(shutdown_timeout=0.3),
                       metrics=MetricsOptions(exporter=metrics))
    run = _shift(handle)
    started = time.monotonic()
    handle.shutdown()
    took = time.monotonic() - started
    metrics.release.set()
    assert run.stop_reason == "answered"
    assert took < 0.3 + SCHEDULING_SLACK  # the bound holds for metrics too (a hung export waits 30 s)
    points = {(p.name, p.error_type): p.value for p in handle.account.points()}
    assert points[point] == 7
    assert "said no" not in handle.account.summary() and "pw@" not in handle.account.summary()


def test_the_export_interval_variable_is_honoured():
    metrics = Metrics()
    handle = configure(exporter=InMemorySpanExporter(), environ={"OTEL_METRIC_EXPORT_INTERVAL": "50"},
                       metrics=MetricsOptions(exporter=metrics))
    _shift(handle)
    deadline = time.monotonic() + 5
    while not metrics.exports and time.monotonic() < deadline:
        time.sleep(0.02)
    assert metrics.exports, "no periodic export within 5 s at a 50 ms interval"
    handle.shutdown()


@pytest.mark.parametrize(("environ", "explicit", "wanted"), [
    ({}, None, True),
    ({"OTEL_METRICS_EXPORTER": "none"}, None, False),
    ({"OTEL_METRICS_EXPORTER": "none"}, True, True),  # an explicit argument wins
    ({"OTEL_METRICS_EXPORTER": "otlp"}, False, False),
    ({"OTEL_SDK_DISABLED": "true"}, True, False),  # disabled is disabled
])
def test_who_decides_whether_there_are_metrics(environ, explicit, wanted):
    handle = configure(exporter=InMemorySpanExporter(), environ=environ,
                       metrics=MetricsOptions(exporter=Metrics(), enabled=explicit))
    assert (handle.meter_provider is not None) is wanted
    handle.shutdown()


def test_an_explicit_span_exporter_alone_sends_no_metrics_anywhere():
    handle = configure(exporter=InMemorySpanExporter(), environ={})
    assert handle.meter_provider is None
    assert handle.account.summary() == "0 spans exported, 0 dropped"


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "soon", "3600001"])
def test_an_out_of_range_interval_is_a_configuration_error(value):
    with pytest.raises(TelemetryConfigError, match="OTEL_METRIC_EXPORT_INTERVAL"):
        configure(exporter=InMemorySpanExporter(), environ={"OTEL_METRIC_EXPORT_INTERVAL": value},
                  metrics=MetricsOptions(exporter=Metrics()))


@pytest.mark.parametrize(("environ", "endpoint", "expected"), [
    ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, None, "http://localhost:4318/v1/metrics"),
    ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, None,
     "http://c:4318/v1/metrics"),
    ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://m:9/x"}, None,
     "http://m:9/x"),
    ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://m:9/x"},
     "http://c:4318", "http://c:4318/v1/metrics"),  # the explicit endpoint wins for both signals
    ({}, "http://c:4317", "http://c:4317"),
])
def test_the_metrics_endpoint_follows_the_traces_base(environ, endpoint, expected):
    traces = resolve_settings(endpoint=endpoint, environ=environ)
    assert resolve_metric_settings(traces.options, environ=environ).endpoint == expected


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_temporality_and_histogram_choices_come_from_the_environ_handed_in_not_os_environ(protocol, monkeypatch):
    from opentelemetry.sdk.metrics import Counter, Histogram, ObservableCounter, UpDownCounter
    from opentelemetry.sdk.metrics.export import AggregationTemporality
    from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, ExponentialBucketHistogramAggregation

    delta, cumulative = AggregationTemporality.DELTA, AggregationTemporality.CUMULATIVE
    # What the process environment says must not count: configure() was handed its own.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "lowmemory")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION", "explicit_bucket_histogram")
    environ = {"OTEL_EXPORTER_OTLP_PROTOCOL": protocol, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
               "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": " Delta ",
               "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION": "base2_exponential_bucket_histogram"}
    handle = configure(environ=environ, batch=BatchOptions(shutdown_timeout=0.2))
    try:
        exporter = handle._metric_exporter
        assert exporter is not None
        temporality = exporter._preferred_temporality
        assert (temporality[Counter], temporality[Histogram], temporality[ObservableCounter],
                temporality[UpDownCounter]) == (delta, delta, delta, cumulative)
        assert isinstance(exporter._preferred_aggregation[Histogram], ExponentialBucketHistogramAggregation)
    finally:
        handle.shutdown(0.2)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "delta")
    handle = configure(environ={"OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
                                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"},
                       batch=BatchOptions(shutdown_timeout=0.2))
    try:
        exporter = handle._metric_exporter
        assert exporter is not None
        assert set(exporter._preferred_temporality.values()) == {cumulative}  # the default, not os.environ's
        assert isinstance(exporter._preferred_aggregation[Histogram], ExplicitBucketHistogramAggregation)
    finally:
        handle.shutdown(0.2)
