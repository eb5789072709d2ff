"""The metadata-only check runs on the export worker: `span.end()` on the calling thread
only enqueues, and nothing reaches an exporter before the worker has checked it, ours and
third-party spans alike. A span the check cannot handle is dropped and counted there."""

from __future__ import annotations

import threading

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cafe_otel import BatchOptions, BoundedBatchSpanProcessor, TelemetryAccount, configure
from cafe_otel._privacy.processor import SpanSanitiser
from cafe_otel.semconv import GEN_AI_REQUEST_MODEL

CANARY = "CANARY customer sentence that is no model name at all, not even close"


class ThreadNoting(SpanSanitiser):
    """The sanitiser, noting which thread checks each span."""

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.threads: list[str] = []

    def __call__(self, span: ReadableSpan) -> ReadableSpan:
        self.threads.append(threading.current_thread().name)
        return super().__call__(span)


def test_span_end_does_not_check_and_the_worker_checks_before_the_exporter_sees_it():
    sink = InMemorySpanExporter()
    handle = configure("svc", exporter=sink, environ={}, batch=BatchOptions(schedule_delay=60.0))
    tracer = handle.provider.get_tracer("third.party.instrumentation")
    with tracer.start_as_current_span("op") as span:
        span.set_attribute(GEN_AI_REQUEST_MODEL, CANARY)  # allowlisted, but not a model's shape
        span.set_attribute("http.request.body", CANARY)  # off the allowlist
    # Ended, queued, not yet checked: the calling thread paid no check.
    assert handle.account.withheld == {}
    assert sink.get_finished_spans() == ()
    assert handle.force_flush(5.0)
    (exported,) = sink.get_finished_spans()
    assert CANARY not in repr(dict(exported.attributes or {}))
    assert "http.request.body" not in (exported.attributes or {})
    assert handle.account.withheld.get(GEN_AI_REQUEST_MODEL) == 1
    handle.shutdown(2.0)


def test_the_check_runs_on_the_batch_worker_not_the_thread_that_ends_the_span():
    sink = InMemorySpanExporter()
    sanitiser = ThreadNoting()
    processor = BoundedBatchSpanProcessor(sink, prepare=sanitiser, schedule_delay=60.0)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    for name in ("a", "b", "c"):
        tracer.start_span(name).end()
    assert sanitiser.threads == []
    assert processor.force_flush(5000)
    assert sanitiser.threads == ["cafe-otel-batch"] * 3
    assert [s.name for s in sink.get_finished_spans()] == ["a", "b", "c"]
    processor.shutdown(2.0)


class Counting(SpanExporter):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def export(self, spans) -> SpanExportResult:
        self.seen += [span.name for span in spans]
        return SpanExportResult.SUCCESS


def _fails_on(names: set[str]):
    sanitiser = SpanSanitiser()

    def prepare(span: ReadableSpan) -> ReadableSpan:
        if span.name in names:
            raise RuntimeError(f"CANARY {span.name}")
        return sanitiser(span)
    return prepare


def test_a_span_the_worker_cannot_check_is_dropped_and_counted_and_the_rest_of_its_batch_goes():
    exporter = Counting()
    account = TelemetryAccount()
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    processor = BoundedBatchSpanProcessor(exporter, account=account, prepare=_fails_on({"bad"}),
                                          schedule_delay=60.0, meter_provider=meters)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    for name in ("ok1", "bad", "ok2", "bad"):
        tracer.start_span(name).end()
    assert processor.force_flush(5000)
    processor.shutdown(2.0)
    assert exporter.seen == ["ok1", "ok2"]
    snap = account.snapshot()
    assert (snap.exported, snap.dropped_redaction_failed, snap.dropped) == (2, 2, 2)
    assert "CANARY" not in (snap.last_error or "")
    assert "RuntimeError" in (snap.last_error or "")
    processed = {}
    for metric in reader.get_metrics_data().resource_metrics[0].scope_metrics[0].metrics:
        if metric.name == "otel.sdk.processor.span.processed":
            for point in metric.data.data_points:
                processed[point.attributes.get("error.type")] = point.value
    assert processed == {None: 2, "redaction_failed": 2}
    meters.shutdown()


def test_a_batch_whose_every_span_fails_the_check_reaches_no_exporter():
    exporter = Counting()
    account = TelemetryAccount()
    processor = BoundedBatchSpanProcessor(exporter, account=account, prepare=_fails_on({"bad"}), schedule_delay=60.0)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    provider.get_tracer("test").start_span("bad").end()
    assert processor.force_flush(5000)
    processor.shutdown(2.0)
    assert exporter.seen == []
    assert (account.exported, account.dropped) == (0, 1)


def test_secrets_added_after_a_span_ended_still_hold_at_its_export():
    sink = InMemorySpanExporter()
    handle = configure("svc", exporter=sink, environ={}, metrics=False, batch=BatchOptions(schedule_delay=60.0))
    secret = "sk-live-0123456789abcdef"
    tracer = handle.provider.get_tracer("third.party")
    tracer.start_span(f"op {secret}").end()
    handle.add_secrets([secret])  # known only now: the check at export still knows it
    assert handle.force_flush(5.0)
    (exported,) = sink.get_finished_spans()
    assert secret not in exported.name
    handle.shutdown(2.0)
