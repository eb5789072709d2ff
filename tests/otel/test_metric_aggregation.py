"""Our in-process metric streams (cafe_otel._metrics.aggregation) and the reader that exports them
beside the MeterProvider's: the same points as the SDK's instruments, every temporality,
the cardinality bound, and one export a collection."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    HistogramDataPoint,
    InMemoryMetricReader,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    ResourceMetrics,
    ScopeMetrics,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import cafe
from cafe.counter import DEFAULT_SCRIPT, ScriptedClient, make_responder, run_shift
from cafe.trace.events import (
    GenerationEnded,
    GenerationRequest,
    GenerationResult,
    ShiftEnded,
    ToolEnded,
)
from cafe.trace.outcomes import StopReason, ToolStatus
from cafe_otel import MetricsOptions, TelemetryAccount, configure
from cafe_otel._metrics.aggregation import CARDINALITY_LIMIT, OVERFLOW, InProcessMetrics
from cafe_otel._metrics.listener import MetricsListener, our_scope
from cafe_otel._metrics.reader import MergingMetricReader

DELTA, CUMULATIVE = AggregationTemporality.DELTA, AggregationTemporality.CUMULATIVE


class Kept(MetricExporter):
    def __init__(self, temporality: AggregationTemporality = CUMULATIVE) -> None:
        super().__init__(preferred_temporality={Histogram: temporality, Counter: temporality})
        self.exports: list = []

    def export(self, metrics_data, timeout_millis: float = 10_000, **kwargs) -> MetricExportResult:
        self.exports.append(metrics_data)
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs) -> None:
        return None


def _points(data) -> dict[tuple, tuple]:
    """(metric name, attributes) -> what the point says, for every point of `data`."""
    found = {}
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for p in metric.data.data_points:
                    key = (metric.name, tuple(sorted(p.attributes.items())))
                    if isinstance(p, HistogramDataPoint):
                        found[key] = (p.count, pytest.approx(p.sum), tuple(p.bucket_counts), tuple(p.explicit_bounds),
                                      pytest.approx(p.min), pytest.approx(p.max))
                    else:
                        found[key] = (p.value,)
    return found


# --- the same points as the SDK's instruments ------------------------------------------

MODELS = st.sampled_from(["gpt-4o-mini", "gpt-4o", "bad model name!", None])
call = st.fixed_dictionaries({
    "provider": st.sampled_from(["openai", "cafe.scripted", ""]),
    "model": MODELS, "response_model": MODELS,
    "address": st.sampled_from([None, "api.example.com", "not a host!"]),
    "port": st.sampled_from([None, 443, 8080]),
    "seconds": st.floats(0, 100, allow_nan=False),
    "input": st.one_of(st.none(), st.integers(0, 10**8)), "output": st.one_of(st.none(), st.integers(0, 10**6)),
    "fails": st.booleans(),
})
tool = st.tuples(st.sampled_from(["price_check", "fire_ticket", "no such tool"]),
                 st.sampled_from(list(ToolStatus)), st.booleans())


def _feed(listener: MetricsListener, calls: list[dict], tools: list[tuple], stop: StopReason) -> None:
    for n, c in enumerate(calls):
        request = GenerationRequest(c["model"] or "", c["provider"], server_address=c["address"],
                                    server_port=c["port"])
        response = {"model": c["response_model"],
                    "usage": {"prompt_tokens": c["input"], "completion_tokens": c["output"]}}
        result = None if c["fails"] else GenerationResult.of(response)
        listener.on_event(GenerationEnded(n, None, 1.0 + c["seconds"], request, result,
                                          error=TimeoutError() if c["fails"] else None, started_at=1.0))
    for n, (name, status, fails) in enumerate(tools):
        listener.on_event(ToolEnded(1000 + n, None, 2.0, name, f"call_{n}", status,
                                    error=KeyError() if fails else None))
    listener.on_event(ShiftEnded(5000, None, 3.0, stop_reason=stop, repairs=len(tools) % 3))


@settings(max_examples=60, deadline=None)
@given(calls=st.lists(call, max_size=12), tools=st.lists(tool, max_size=6), stop=st.sampled_from(list(StopReason)))
def test_in_process_streams_give_the_points_the_sdk_instruments_give(calls, tools, stop):
    sdk_reader = InMemoryMetricReader()
    sdk_account, our_account = TelemetryAccount(), TelemetryAccount()
    _feed(MetricsListener(MeterProvider(metric_readers=[sdk_reader], shutdown_on_exit=False), account=sdk_account),
          calls, tools, stop)
    ours = InProcessMetrics(our_scope())
    _feed(MetricsListener(ours, account=our_account), calls, tools, stop)
    our_data = MetricsData([ResourceMetrics(Resource({}), [ScopeMetrics(ours.scope, ours.collect(
        lambda kind: CUMULATIVE), "")], "")])
    assert _points(our_data) == _points(sdk_reader.get_metrics_data())
    assert our_account.withheld == sdk_account.withheld


# --- the streams themselves ----------------------------------------------------------

def test_a_delta_collection_holds_only_what_came_since_the_last():
    ours = InProcessMetrics(our_scope())
    durations = ours.histogram("d", unit="s", description="", boundaries=(1, 2))
    counter = ours.counter("c", unit="1", description="")
    key = (("k", "v"),)
    durations.record(0.5, key)
    durations.record(5, key)
    counter.add(2, key)
    [h, c] = ours.collect(lambda kind: DELTA, now_ns=10)
    assert [(p.count, p.sum, list(p.bucket_counts), p.min, p.max) for p in h.data.data_points] == [
        (2, 5.5, [1, 0, 1], 0.5, 5)]
    assert [p.value for p in c.data.data_points] == [2]
    assert ours.collect(lambda kind: DELTA, now_ns=20) == []  # nothing new: nothing to say
    durations.record(1.5, key)
    [h] = ours.collect(lambda kind: DELTA, now_ns=30)
    [point] = h.data.data_points
    assert (point.count, list(point.bucket_counts), point.start_time_unix_nano, point.time_unix_nano) == (
        1, [0, 1, 0], 20, 30)


def _call(seconds: float, input_tokens: int) -> dict:
    return {"provider": "openai", "model": "gpt-4o-mini", "response_model": "gpt-4o-mini", "address": None,
            "port": None, "seconds": seconds, "input": input_tokens, "output": 7, "fails": False}


def test_a_listeners_calls_after_a_delta_collection_are_in_the_next_one_only():
    # The listener keeps each call's buckets between calls: a delta collection lets them go,
    # and the next call must record into the stream's new ones, not the collected ones.
    ours = InProcessMetrics(our_scope())
    listener = MetricsListener(ours)
    _feed(listener, [_call(0.5, 10), _call(0.5, 20)], [], StopReason.ANSWERED)
    first = {m.name: m for m in ours.collect(lambda kind: DELTA, now_ns=10)}
    _feed(listener, [_call(3.0, 300)], [], StopReason.ANSWERED)
    second = {m.name: m for m in ours.collect(lambda kind: DELTA, now_ns=20)}
    duration, tokens = "gen_ai.client.operation.duration", "gen_ai.client.token.usage"
    assert [(p.count, p.sum) for p in first[duration].data.data_points] == [(2, 1.0)]
    assert [(p.count, p.sum) for p in second[duration].data.data_points] == [(1, 3.0)]
    assert sorted((p.count, p.sum) for p in first[tokens].data.data_points) == [(2, 14), (2, 30)]
    assert sorted((p.count, p.sum) for p in second[tokens].data.data_points) == [(1, 7), (1, 300)]
    assert ours.collect(lambda kind: DELTA, now_ns=30) == []  # nothing new: nothing to say


def test_a_listeners_calls_from_many_threads_are_all_counted():
    ours = InProcessMetrics(our_scope())
    listener = MetricsListener(ours)
    collected: list = []

    def work() -> None:
        for _ in range(500):
            _feed(listener, [_call(0.5, 1)], [], StopReason.ANSWERED)

    def collect() -> None:
        for _ in range(50):
            collected.extend(ours.collect(lambda kind: DELTA))

    threads = [threading.Thread(target=work) for _ in range(3)] + [threading.Thread(target=collect)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    collected.extend(ours.collect(lambda kind: DELTA))
    counted = sum(p.count for m in collected if m.name == "gen_ai.client.operation.duration"
                  for p in m.data.data_points)
    assert counted == 1500  # none recorded into buckets a collection had already let go


def test_a_cumulative_collection_keeps_counting_from_the_first_record():
    ours = InProcessMetrics(our_scope())
    counter = ours.counter("c", unit="1", description="")
    counter.add(1)
    [first] = ours.collect(lambda kind: CUMULATIVE, now_ns=10**19)
    counter.add(3)
    counter.add(-5)  # a monotonic sum takes no negative increment (nor does the SDK's)
    [second] = ours.collect(lambda kind: CUMULATIVE, now_ns=2 * 10**19)
    assert [p.value for p in second.data.data_points] == [4]
    assert second.data.data_points[0].start_time_unix_nano == first.data.data_points[0].start_time_unix_nano


def test_past_the_cardinality_limit_points_go_to_the_overflow_set():
    ours = InProcessMetrics(our_scope())
    stream = ours.histogram("h", unit="s", description="", boundaries=(1,))
    for n in range(CARDINALITY_LIMIT + 50):
        stream.record(0.5, (("gen_ai.response.model", f"m-{n}"),))
    [metric] = ours.collect(lambda kind: CUMULATIVE)
    points = metric.data.data_points
    assert len(points) == CARDINALITY_LIMIT
    [overflow] = [p for p in points if dict(p.attributes) == dict(OVERFLOW)]
    assert overflow.count == 51
    assert sum(p.count for p in points) == CARDINALITY_LIMIT + 50  # nothing lost


def test_two_listeners_on_one_in_process_metrics_add_up_in_one_stream():
    ours = InProcessMetrics(our_scope())
    for listener in (MetricsListener(ours), MetricsListener(ours)):
        _feed(listener, [], [("price_check", ToolStatus.OK, False)], StopReason.ANSWERED)
    shifts = [m for m in ours.collect(lambda kind: CUMULATIVE) if m.name == "cafe.shifts"]
    assert [[p.value for p in m.data.data_points] for m in shifts] == [[2]]
    with pytest.raises(ValueError, match="exists as a counter"):
        ours.histogram("cafe.shifts", unit="1", description="", boundaries=(1,))


def test_records_from_many_threads_are_all_counted():
    ours = InProcessMetrics(our_scope())
    stream = ours.histogram("h", unit="s", description="", boundaries=(1,))

    def work() -> None:
        for _ in range(2000):
            stream.record(2.0, ())

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    [metric] = ours.collect(lambda kind: CUMULATIVE)
    assert [(p.count, p.sum) for p in metric.data.data_points] == [(8000, 16000.0)]


# --- the reader --------------------------------------------------------------------------

def _reader(exporter: Kept, **options) -> tuple[MergingMetricReader, MeterProvider, InProcessMetrics]:
    ours = InProcessMetrics(our_scope())
    reader = MergingMetricReader(exporter, ours, resource=Resource({"service.name": "t"}), export_interval=3600,
                                 export_timeout=5, **options)
    return reader, MeterProvider(metric_readers=[reader], resource=Resource({"service.name": "t"}),
                                 shutdown_on_exit=False), ours


def test_ours_and_the_providers_metrics_leave_in_one_export_under_their_scopes():
    exporter = Kept()
    _, provider, ours = _reader(exporter)
    provider.get_meter("app").create_counter("app.orders").add(3)
    ours.counter("cafe.shifts", unit="{shift}", description="").add(1, (("cafe.stop_reason", "answered"),))
    assert provider.force_flush()
    [data] = exporter.exports
    [resource_metrics] = data.resource_metrics
    assert resource_metrics.resource.attributes["service.name"] == "t"
    scopes = {sm.scope.name: [m.name for m in sm.metrics] for sm in resource_metrics.scope_metrics}
    assert scopes == {"app": ["app.orders"], "cafe_otel": ["cafe.shifts"]}
    provider.shutdown()


def test_ours_are_exported_when_the_provider_has_nothing():
    exporter = Kept()
    _, provider, ours = _reader(exporter)
    ours.histogram("gen_ai.client.operation.duration", unit="s", description="", boundaries=(1,)).record(0.2, ())
    provider.shutdown()  # the final collection
    [data] = exporter.exports
    [rm] = data.resource_metrics
    assert [(sm.scope.name, [m.name for m in sm.metrics]) for sm in rm.scope_metrics] == [
        ("cafe_otel", ["gen_ai.client.operation.duration"])]


def test_a_collection_that_raises_is_reported_and_raises_nothing():
    exporter, reports = Kept(), []
    reader, provider, ours = _reader(exporter, on_failure=reports.append)
    stream = ours.counter("c", unit="1", description="")
    stream.add(1)
    stream.collect = lambda *args: 1 / 0  # type: ignore[method-assign]
    assert reader.force_flush() is False  # said, not raised
    provider.shutdown()
    assert [str(r) for r in reports] == ["metrics flush failed (ZeroDivisionError)",
                                         "final metrics collection failed (ZeroDivisionError)"]


def test_configure_sends_the_genai_metrics_of_a_shift_through_the_reader():
    exporter = Kept(DELTA)
    handle = configure(exporter=InMemorySpanExporter(), environ={}, metrics=MetricsOptions(exporter=exporter))
    tracer = handle.tracer()
    run_shift(ScriptedClient(), list(DEFAULT_SCRIPT), make_responder([]), tracer=tracer)
    handle.shutdown(5.0)
    usage = cafe.usage_of(tracer)
    points: dict[str, list] = {}
    for data in exporter.exports:
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    points.setdefault(metric.name, []).extend(metric.data.data_points)
    tokens = points["gen_ai.client.token.usage"]
    assert sum(p.sum for p in tokens if p.attributes["gen_ai.token.type"] == "input") == usage.input_tokens
    assert sum(p.sum for p in tokens if p.attributes["gen_ai.token.type"] == "output") == usage.output_tokens
    assert sum(p.count for p in points["gen_ai.client.operation.duration"]) == usage.calls
    assert handle.account.snapshot().metric_points_exported == sum(len(v) for v in points.values())


def test_one_listener_serves_shifts_that_run_at_once():
    """The handle's MetricsListener hears every tracer it made; their span ids overlap (each
    tracer counts from 1) and their clocks are their own."""
    exporter = Kept()
    handle = configure(exporter=InMemorySpanExporter(), environ={}, metrics=MetricsOptions(exporter=exporter))
    first = handle.tracer(cafe.TickClock(step=1.0))
    second = handle.tracer(cafe.TickClock(start=100.0, step=10.0))
    request = {"model": "m", "provider": "p", "input": []}
    a = first.generation("chat m", **request)
    b = second.generation("chat m", **request)
    # first starts at 0.0, then second at 100.0 with the same span id; second ends at 110.0
    # (a 10 s call), first at 1.0 (a 1 s call).
    with a, b:
        pass
    handle.shutdown(5.0)
    [data] = exporter.exports
    [point] = [p for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
               if m.name == "gen_ai.client.operation.duration" for p in m.data.data_points]
    assert (point.count, point.sum, point.min, point.max) == (2, 11.0, 1.0, 10.0)
