"""Metric points of anyone's instruments on our MeterProvider (an application's counter, a
third-party instrumentation's histogram) get what a span gets: the allowlist, the shapes
and the secret checks, before anything is encoded (`cafe_otel._privacy.metrics`)."""

from __future__ import annotations

from typing import Any

from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cafe import counter
from cafe_otel import BatchOptions, MetricsOptions, configure
from cafe_otel._configure import TelemetryHandle

KEY = "live-key-5e4d3c2b1a0f9e8d"  # the live client's: fits no pattern, only add_secrets names it
GITHUB = "ghp_Ab3dEf6hIj9lMn2pQr5tUv"  # fits an id's shape: only the secret patterns stop it
FREE_TEXT = "my address is 12 Rue de la Paix"
HOSTILE = {
    "customer.note": FREE_TEXT,  # off the allowlist
    "error.type": FREE_TEXT,  # on it, but no error type has spaces
    "gen_ai.request.model": KEY,  # of the model's shape, and the live key
    "gen_ai.response.id": GITHUB,  # of an id's shape, and a GitHub token
    "http.request.method": "GET",  # metadata: it stays
}


class KeptMetrics(MetricExporter):
    def __init__(self) -> None:
        super().__init__()
        self.exports: list[MetricsData] = []

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        self.exports.append(metrics_data)
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None

    def encoded(self) -> bytes:
        return b"".join(encode_metrics(data).SerializeToString() for data in self.exports)

    def metric(self, name: str) -> Any:
        found = [metric for resource in self.exports[-1].resource_metrics for scope in resource.scope_metrics
                 for metric in scope.metrics if metric.name == name]
        assert len(found) <= 1
        return found[0] if found else None


def _handle(**options: Any) -> tuple[TelemetryHandle, InMemorySpanExporter, KeptMetrics]:
    spans, metrics = InMemorySpanExporter(), KeptMetrics()
    handle = configure(exporter=spans, environ={}, set_global=False, secrets=[KEY],
                       batch=BatchOptions(schedule_delay=0.05), metrics=MetricsOptions(exporter=metrics), **options)
    assert handle.meter_provider is not None
    return handle, spans, metrics


def test_another_instruments_point_keeps_only_what_a_span_would_keep():
    handle, spans, metrics = _handle()
    meter = handle.meter_provider.get_meter("myapp")  # type: ignore[union-attr]
    meter.create_counter("myapp.orders").add(1, HOSTILE)
    meter.create_histogram("myapp.latency", unit="s").record(0.25, HOSTILE)
    with handle.provider.get_tracer("myapp").start_as_current_span("order", attributes=HOSTILE):  # type: ignore[union-attr]
        pass
    handle.shutdown(5.0)
    data = metrics.encoded()
    for text in (KEY, GITHUB, FREE_TEXT, "customer.note"):
        assert text.encode() not in data
    (span,) = spans.get_finished_spans()
    for name in ("myapp.orders", "myapp.latency"):
        (point,) = metrics.metric(name).data.data_points
        assert dict(point.attributes) == dict(span.attributes) == {"http.request.method": "GET"}
    assert metrics.metric("myapp.orders").data.data_points[0].value == 1
    # Each value left off is counted, on the span and on each instrument's point.
    withheld = handle.account.withheld
    assert all(withheld[key] == 3 for key in ("error.type", "gen_ai.request.model", "gen_ai.response.id")), withheld


def test_a_point_exported_again_is_counted_once():
    handle, _, metrics = _handle()
    counter = handle.meter_provider.get_meter("myapp").create_counter("myapp.orders")  # type: ignore[union-attr]
    counter.add(1, {"error.type": FREE_TEXT})
    for _ in range(3):  # cumulative: each export carries the same point again
        assert handle.force_flush(5.0)
    handle.shutdown(5.0)
    assert len(metrics.exports) >= 3
    assert handle.account.withheld == {"error.type": 1}


def test_points_whose_attributes_are_left_off_merge_into_one():
    handle, _, metrics = _handle()
    meter = handle.meter_provider.get_meter("myapp")  # type: ignore[union-attr]
    counter, histogram = meter.create_counter("myapp.orders"), meter.create_histogram("myapp.latency")
    for amount, customer in ((1, "ann"), (2, "bob"), (4, "cy")):
        counter.add(amount, {"customer.name": customer, "http.request.method": "POST"})
        histogram.record(amount / 10, {"customer.name": customer})
    counter.add(8, {"customer.name": "dee", "http.request.method": "GET"})
    handle.shutdown(5.0)
    points = {tuple(sorted(dict(p.attributes).items())): p.value
              for p in metrics.metric("myapp.orders").data.data_points}
    assert points == {(("http.request.method", "POST"),): 7, (("http.request.method", "GET"),): 8}
    (latency,) = metrics.metric("myapp.latency").data.data_points
    assert dict(latency.attributes) == {} and latency.count == 3
    assert abs(latency.sum - 0.7) < 1e-9 and (latency.min, latency.max) == (0.1, 0.4)
    assert sum(latency.bucket_counts) == 3


def test_an_instrument_whose_name_or_description_holds_a_secret_leaves_neither():
    handle, _, metrics = _handle()
    meter = handle.meter_provider.get_meter("myapp")  # type: ignore[union-attr]
    meter.create_counter(GITHUB).add(1)
    meter.create_counter("myapp.orders", description=f"orders, token {GITHUB}").add(1)
    handle.shutdown(5.0)
    assert GITHUB.encode() not in metrics.encoded()
    assert metrics.metric(GITHUB) is None
    assert metrics.metric("myapp.orders").description == ""
    assert handle.account.withheld["metric.name"] >= 1 and handle.account.withheld["metric.description"] >= 1


def test_a_meters_scope_holding_a_secret_is_redacted_as_a_spans_is():
    handle, _, metrics = _handle()
    handle.meter_provider.get_meter(GITHUB, GITHUB).create_counter("myapp.orders").add(1)  # type: ignore[union-attr]
    handle.shutdown(5.0)
    assert GITHUB.encode() not in metrics.encoded()
    scopes = {scope.scope.name: scope.scope.version for resource in metrics.exports[-1].resource_metrics
              for scope in resource.scope_metrics}
    assert scopes["redacted"] is None


def test_the_callers_own_shapes_let_their_keys_onto_points():
    from cafe_otel import text_shape

    handle, _, metrics = _handle(shapes={"myapp.tier": text_shape(values={"gold", "silver"})})
    counter = handle.meter_provider.get_meter("myapp").create_counter("myapp.orders")  # type: ignore[union-attr]
    counter.add(1, {"myapp.tier": "gold"})
    counter.add(1, {"myapp.tier": FREE_TEXT})
    handle.shutdown(5.0)
    values = sorted(dict(p.attributes).get("myapp.tier", "") for p in metrics.metric("myapp.orders").data.data_points)
    assert values == ["", "gold"]


def test_our_own_metrics_pass_unchanged():

    from .conftest import SEED_DECISIONS

    handle, _, metrics = _handle()
    counter.run_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, counter.make_responder(SEED_DECISIONS),
                   tracer=handle.tracer())
    handle.shutdown(5.0)
    (shifts,) = metrics.metric("cafe.shifts").data.data_points
    assert dict(shifts.attributes) == {"cafe.stop_reason": "answered"}
    assert handle.account.withheld == {}
