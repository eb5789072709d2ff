"""One settle step for both signals: a batch of spans and a metric export that meet the same
exporter behaviour, or the same attempts at shutdown's bound, are counted the same way, each
under its own signal's names."""

from __future__ import annotations

import threading
import time

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from cafe_otel import BoundedBatchSpanProcessor, TelemetryAccount
from cafe_otel._export.account import (
    EXPORTED,
    INFLIGHT,
    METRIC_NAMES,
    PROCESSED,
    QUEUE_FULL,
    SHUTDOWN_TIMEOUT,
    Point,
)
from cafe_otel._export.attempts import AttemptEnd, AttemptLog, Delivery
from cafe_otel._export.metrics_export import FailSoftMetricExporter, count_points

ITEMS = 4
TIMEOUT = 0.05
WAIT = 10.0  # a bounded wait's ceiling; never a duration a test asserts


def _points(count: int = ITEMS) -> MetricsData:
    reader = InMemoryMetricReader()
    counter = MeterProvider(metric_readers=[reader]).get_meter("test").create_counter("cafe.test")
    for number in range(count):
        counter.add(1, {"n": number})
    data = reader.get_metrics_data()
    assert data is not None and count_points(data) == count
    return data


class _Behaves:
    """Does what it is told in export: succeed, fail, raise, or hang until released; or plays
    attempt ends into a log and then holds the export."""

    def __init__(self, behaviour: str, log: AttemptLog | None = None, ends: tuple[AttemptEnd, ...] = (),
                 outstanding: bool = False) -> None:
        self.behaviour, self.log, self.ends, self.outstanding = behaviour, log, ends, outstanding
        self.release, self.holding = threading.Event(), threading.Event()
        self.calls = 0
        self.rejects_first = self.rejects = 0  # what the receiver's answer to the first export rejects

    def run(self, success: object, failure: object) -> object:
        self.calls += 1
        if self.calls == 1:
            self.rejects = self.rejects_first
        if self.log is not None:
            for end in self.ends:
                self.log.begin()
                self.log.end(end)
            if self.outstanding:
                self.log.begin()
        if self.behaviour == "raise":
            raise RuntimeError("CANARY from the exporter")
        if self.behaviour == "hang":
            self.holding.set()
            self.release.wait(WAIT)
        return failure if self.behaviour == "failure" else success


class _Spans(SpanExporter):
    def __init__(self, behaves: _Behaves) -> None:
        self.behaves = behaves

    def export(self, spans):
        return self.behaves.run(SpanExportResult.SUCCESS, SpanExportResult.FAILURE)

    def shutdown(self):
        return None


class _Metrics(MetricExporter):
    def __init__(self, behaves: _Behaves, shutdown: str = "ok") -> None:
        super().__init__()
        self.behaves = behaves
        self.shutdown_behaviour = shutdown
        self.shut = threading.Event()

    def export(self, metrics_data, timeout_millis: float = 10_000, **kwargs):
        return self.behaves.run(MetricExportResult.SUCCESS, MetricExportResult.FAILURE)

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs) -> None:
        self.shut.set()
        if self.shutdown_behaviour == "raise":
            raise ConnectionError("CANARY from the shutdown")
        if self.shutdown_behaviour == "hang":
            self.behaves.release.wait(WAIT)


def _span_counts(behaves: _Behaves, *, log: AttemptLog | None = None, bound: float = 2.0,
                 timeout: float = TIMEOUT, **answers):
    account = TelemetryAccount()
    processor = BoundedBatchSpanProcessor(_Spans(behaves), account=account, schedule_delay=0.01,
                                          export_timeout=timeout, export_grace=0.0, attempts=log, **answers)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    for number in range(ITEMS):
        provider.get_tracer("test").start_span(f"span {number}").end()
    if log is not None and behaves.behaviour == "hang":  # held in flight: shutdown's bound judges it
        assert behaves.holding.wait(WAIT)
    processor.shutdown(bound)
    behaves.release.set()
    snapshot = account.snapshot()
    return snapshot.exported, snapshot.export_failed_by_type, snapshot.unconfirmed


def _metric_counts(behaves: _Behaves, *, log: AttemptLog | None = None, timeout: float = TIMEOUT, **answers):
    account = TelemetryAccount()
    account.enable_metrics()
    exporter = FailSoftMetricExporter(_Metrics(behaves), account=account, export_timeout=timeout, attempts=log,
                                      **answers)
    if log is not None and behaves.behaviour == "hang":  # shutdown's deadline runs out while it is held
        exporter.close_by(time.monotonic() + 0.1)
    exporter.export(_points())
    behaves.release.set()
    snapshot = account.snapshot()
    return snapshot.metric_points_exported, snapshot.metric_points_dropped_by_type, snapshot.metric_points_unconfirmed


def _rejects_once(behaves: _Behaves) -> object:
    """As the partial-success reader does: the receiver's answer to the first export rejects
    one item, and asking takes the count; so it holds however many batches the worker makes of
    the items on a busy machine."""
    def rejected() -> int:
        taken, behaves.rejects = behaves.rejects, 0
        return taken
    behaves.rejects_first = 1
    return rejected


# The receiver's answers, as the partial-success reader reports them after an export.
ANSWERS = {"none": lambda behaves: {}, "rejected": lambda behaves: {"rejected": _rejects_once(behaves)},
           "refused": lambda behaves: {"refused": lambda: 308}}


@pytest.mark.parametrize(("behaviour", "answer", "counts"), [
    ("success", "none", (ITEMS, {}, 0)),
    ("failure", "none", (0, {"failure": ITEMS}, 0)),
    ("raise", "none", (0, {"RuntimeError": ITEMS}, 0)),
    ("hang", "none", (0, {"timeout": ITEMS}, 0)),
    ("success", "rejected", (ITEMS - 1, {"rejected": 1}, 0)),  # OTLP partial success
    ("success", "refused", (0, {"308": ITEMS}, 0)),  # a 3xx the exporter called a success
])
def test_spans_and_metric_points_are_settled_alike(behaviour, answer, counts):
    spans, metrics = _Behaves(behaviour), _Behaves(behaviour)
    assert _span_counts(spans, **ANSWERS[answer](spans)) == counts
    assert _metric_counts(metrics, **ANSWERS[answer](metrics)) == counts


REFUSED, UNKNOWN, OK = (AttemptEnd(Delivery.NOT_DELIVERED, "ConnectionError"),
                        AttemptEnd(Delivery.UNKNOWN, "ReadTimeout"), AttemptEnd(Delivery.DELIVERED, "200"))


@pytest.mark.parametrize(("ends", "outstanding", "counts"), [
    ((OK,), False, (ITEMS, {}, 0)),  # answered, the exporter not yet returned: delivered
    ((), False, (0, {SHUTDOWN_TIMEOUT: ITEMS}, 0)),  # never reached the transport
    ((REFUSED,), False, (0, {"ConnectionError": ITEMS}, 0)),  # only waiting to retry
    ((UNKNOWN, REFUSED), False, (0, {}, ITEMS)),  # it may have arrived
    ((REFUSED,), True, (0, {}, ITEMS)),  # a retry is out
])
def test_an_export_held_at_shutdowns_bound_is_judged_alike_for_both_signals(ends, outstanding, counts):
    for settle in (lambda log, behaves: _span_counts(behaves, log=log, bound=0.1, timeout=WAIT),
                   lambda log, behaves: _metric_counts(behaves, log=log, timeout=WAIT)):
        log = AttemptLog()
        log.attach()
        assert settle(log, _Behaves("hang", log, ends, outstanding)) == counts


@pytest.mark.parametrize(("behaviour", "ends", "counts"), [
    ("failure", (UNKNOWN,), (0, {}, ITEMS)),  # the request went out, its answer never came
    ("raise", (UNKNOWN, REFUSED), (0, {}, ITEMS)),  # a retry failed; the first may have arrived
    ("failure", (OK, REFUSED), (0, {}, ITEMS)),  # part of it was delivered
    ("failure", (REFUSED, REFUSED), (0, {"failure": ITEMS}, 0)),  # nothing reached a receiver
    ("raise", (), (0, {"RuntimeError": ITEMS}, 0)),  # no attempt at all
])
def test_a_failed_export_whose_delivery_its_attempts_leave_unknown_is_unconfirmed(behaviour, ends, counts):
    # The exporter's own verdict, FAILURE after its timeout, says nothing of what a receiver
    # stored: its attempts at the transport do.
    for settle in (_span_counts, _metric_counts):
        log = AttemptLog()
        log.attach()
        assert settle(_Behaves(behaviour, log, ends), log=log, timeout=WAIT) == counts


def test_a_metric_export_after_shutdown_is_not_attempted_and_is_counted():
    behaves = _Behaves("success")
    account = TelemetryAccount()
    account.enable_metrics()
    inner = _Metrics(behaves)
    exporter = FailSoftMetricExporter(inner, account=account, export_timeout=1.0)
    exporter.shutdown()
    assert exporter.export(_points()) is MetricExportResult.FAILURE
    assert behaves.calls == 0
    assert account.snapshot().metric_points_dropped_by_type == {"already_shutdown": ITEMS}


@pytest.mark.parametrize(("shutdown", "why"), [("raise", "raised ConnectionError"), ("hang", "no answer within")])
def test_a_metric_exporters_failed_shutdown_is_noted_by_class_only(shutdown, why):
    behaves = _Behaves("success")
    account = TelemetryAccount()
    inner = _Metrics(behaves, shutdown=shutdown)
    exporter = FailSoftMetricExporter(inner, account=account, export_timeout=0.1, target="the collector")
    exporter.shutdown(timeout_millis=100)
    behaves.release.set()
    assert inner.shut.is_set()
    assert account.last_note is not None and account.last_note.startswith(f"shutdown of the collector: {why}")
    assert "CANARY" not in account.summary()


@pytest.mark.parametrize("signal", ["traces", "metrics"])
def test_every_count_is_read_under_its_signals_sdk_name(signal):
    account = TelemetryAccount()
    account.enable_metrics()
    account.add(signal, EXPORTED, 3)
    account.add(signal, EXPORTED, 2, "timeout", "export to x: no answer within 1s")
    account.add(signal, INFLIGHT, 1, why="still in flight")
    points = account.points()
    assert Point(METRIC_NAMES[(signal, EXPORTED)], None, 3) in points
    assert Point(METRIC_NAMES[(signal, EXPORTED)], "timeout", 2) in points
    assert Point(METRIC_NAMES[(signal, INFLIGHT)], None, 1) in points
    snapshot = account.snapshot()
    assert snapshot.count(signal, EXPORTED) == 3 and snapshot.lost(signal) == 2
    assert "(unconfirmed: still in flight)" in account.summary()
    assert account.last_error == "export to x: no answer within 1s"


def test_a_span_lost_before_export_counts_under_the_processors_name_in_cause_order():
    account = TelemetryAccount()
    account.add("traces", PROCESSED, 1, SHUTDOWN_TIMEOUT, "still queued")
    account.add("traces", PROCESSED, 2, QUEUE_FULL, "queue full")
    assert [p for p in account.points() if p.name == METRIC_NAMES[("traces", PROCESSED)]] == [
        Point(METRIC_NAMES[("traces", PROCESSED)], QUEUE_FULL, 2),
        Point(METRIC_NAMES[("traces", PROCESSED)], SHUTDOWN_TIMEOUT, 1)]
    assert account.summary().startswith("0 spans exported, 3 dropped (2 queue full, 1 not flushed in time)")

