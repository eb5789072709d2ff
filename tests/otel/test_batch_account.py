"""Every sampled span handed to `BoundedBatchSpanProcessor.on_end` is settled exactly once,
exported or dropped, whatever the exporter does: raise, hang, fail, answer late, or misbehave
in force_flush and shutdown."""

from __future__ import annotations

import threading
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult

from cafe_otel import BoundedBatchSpanProcessor, FailSoftSpanExporter, TelemetryAccount
from tests.timing import SCHEDULING_SLACK

TIMEOUT = 0.05  # the export bound in these tests (grace 0): a hang is anything longer
HANG = 0.2  # how long a "hung" call blocks before it answers, long after it was abandoned


class RecordOnlyWhenAsked(Sampler):
    """Records every span but samples only those not named `unsampled`: an unsampled span
    still reaches on_end (RECORD_ONLY), as it does under a rate-limiting sampler."""

    def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None, links=None,
                      trace_state=None) -> SamplingResult:
        return SamplingResult(Decision.RECORD_ONLY if name == "unsampled" else Decision.RECORD_AND_SAMPLE)

    def get_description(self) -> str:
        return "RecordOnlyWhenAsked"


def _tracer(processor):
    provider = TracerProvider(sampler=RecordOnlyWhenAsked())
    provider.add_span_processor(processor)
    return provider.get_tracer("test")


class ScriptedExporter(SpanExporter):
    """Each export call does the next thing its script says; force_flush and shutdown do
    what they are told. Keeps track of the calls still running so a test can wait them out."""

    def __init__(self, script, flush: str = "ok", shutdown: str = "ok", hang: float = HANG) -> None:
        self.script = list(script)
        self.hang = hang
        self.flush_fault = flush
        self.shutdown_fault = shutdown
        self.answered_success = 0  # spans of exports that returned SUCCESS, in time or not
        self._running = 0
        self._lock = threading.Lock()
        self.idle = threading.Condition(self._lock)

    def _call(self, fault: str, result):
        with self._lock:
            self._running += 1
        try:
            if fault == "raise":
                raise RuntimeError("CANARY from the exporter")
            if fault == "hang":
                time.sleep(self.hang)
            if fault == "slow":
                time.sleep(TIMEOUT / 5)
            return result(fault)
        finally:
            with self._lock:
                self._running -= 1
                self.idle.notify_all()

    def export(self, spans):
        with self._lock:
            fault = self.script.pop(0) if self.script else "success"

        def result(fault: str):
            if fault == "failure":
                return SpanExportResult.FAILURE
            with self._lock:
                self.answered_success += len(spans)
            return SpanExportResult.SUCCESS
        return self._call(fault, result)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._call(self.flush_fault, lambda fault: fault != "failure")

    def shutdown(self) -> None:
        self._call(self.shutdown_fault, lambda fault: None)

    def wait_idle(self) -> None:
        with self.idle:
            assert self.idle.wait_for(lambda: self._running == 0, timeout=5 * HANG)


EXPORT_FAULTS = st.sampled_from(["success", "failure", "raise", "hang", "slow"])
CONTROL_FAULTS = st.sampled_from(["ok", "failure", "raise", "hang"])
STEP = st.tuples(st.integers(0, 5), st.integers(0, 2), st.booleans())  # sampled, unsampled, flush


@settings(max_examples=35, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    script=st.lists(EXPORT_FAULTS, max_size=8),
    steps=st.lists(STEP, min_size=1, max_size=5),
    flush=CONTROL_FAULTS,
    shutdown=CONTROL_FAULTS,
    queue=st.integers(1, 8),
    batch=st.integers(1, 4),
    after_shutdown=st.integers(0, 2),
)
def test_exported_plus_dropped_is_every_sampled_span_whatever_the_exporter_does(
        script, steps, flush, shutdown, queue, batch, after_shutdown):
    exporter = ScriptedExporter(script, flush=flush, shutdown=shutdown)
    account = TelemetryAccount()
    processor = BoundedBatchSpanProcessor(exporter, account=account, max_queue_size=queue,
                                          max_export_batch_size=batch, schedule_delay=0.005,
                                          export_timeout=TIMEOUT, export_grace=0.0, shutdown_timeout=0.1)
    tracer = _tracer(processor)
    made = 0
    for sampled, unsampled, flush_now in steps:
        for _ in range(sampled):
            tracer.start_span("sampled").end()
        for _ in range(unsampled):
            tracer.start_span("unsampled").end()
        made += sampled
        if flush_now:
            processor.force_flush(int(TIMEOUT * 1000))
    started = time.monotonic()
    processor.shutdown()
    # It returns, whatever the exporter does. This test's hangs (HANG) are shorter than the
    # slack: that a shutdown never waits a hang out is the 6 s hang test's to show, below.
    assert time.monotonic() - started < 0.1 + SCHEDULING_SLACK
    for _ in range(after_shutdown):
        tracer.start_span("sampled").end()
    made += after_shutdown

    settled = account.snapshot()
    assert settled.exported + settled.dropped == made, account.summary()
    exporter.wait_idle()  # every abandoned call has answered by now, some with SUCCESS
    late = account.snapshot()
    assert (late.exported, late.dropped) == (settled.exported, settled.dropped), "counted twice"
    assert late.exported <= exporter.answered_success
    assert "CANARY" not in account.summary()


def test_an_exporter_that_raises_does_not_kill_the_worker():
    """The reproduction from issue 10: 6 spans, batches of 3, an exporter that raises once.
    The old processor lost the worker with the first batch and counted 3 of the 6."""
    exporter = ScriptedExporter(["raise"])
    account = TelemetryAccount()
    processor = BoundedBatchSpanProcessor(exporter, account=account, max_export_batch_size=3,
                                          schedule_delay=0.01, export_timeout=1.0)
    tracer = _tracer(processor)
    for _ in range(3):
        tracer.start_span("sampled").end()
    assert processor.force_flush(2000)
    for _ in range(3):
        tracer.start_span("sampled").end()
    processor.shutdown(2.0)
    assert (account.exported, account.dropped_export_failed) == (3, 3), account.summary()
    assert "exporter raised RuntimeError" in account.last_error


def test_an_exporter_that_returns_failure_is_counted_as_dropped():
    account = TelemetryAccount()
    processor = BoundedBatchSpanProcessor(ScriptedExporter(["failure"]), account=account,
                                          schedule_delay=0.01)
    tracer = _tracer(processor)
    for _ in range(4):
        tracer.start_span("sampled").end()
    processor.shutdown(2.0)
    assert (account.exported, account.dropped_export_failed) == (0, 4)
    assert "returned FAILURE" in account.last_error


def test_unsampled_spans_are_neither_exported_nor_counted():
    sink = InMemorySpanExporter()
    account = TelemetryAccount()
    processor = BoundedBatchSpanProcessor(sink, account=account, schedule_delay=0.01)
    tracer = _tracer(processor)
    tracer.start_span("sampled").end()
    tracer.start_span("unsampled").end()
    processor.shutdown(2.0)
    assert [span.name for span in sink.get_finished_spans()] == ["sampled"]
    assert (account.exported, account.dropped) == (1, 0)


def test_a_hung_export_is_abandoned_and_later_batches_still_go_out():
    exporter = ScriptedExporter(["hang"])
    account = TelemetryAccount()
    processor = BoundedBatchSpanProcessor(exporter, account=account, max_export_batch_size=2,
                                          schedule_delay=0.01, export_timeout=TIMEOUT, export_grace=0.0)
    tracer = _tracer(processor)
    for _ in range(2):
        tracer.start_span("sampled").end()
    assert processor.force_flush(2000)  # the worker gave up on the hung export
    assert account.dropped_export_failed == 2
    exporter.wait_idle()  # the hung call answers, late; the next batch goes through
    for _ in range(2):
        tracer.start_span("sampled").end()
    processor.shutdown(2.0)
    assert (account.exported, account.dropped) == (2, 2), account.summary()
    assert f"no answer within {TIMEOUT:g}s" in (account.snapshot().last_error or "")


def test_a_plain_exporter_whose_shutdown_hangs_does_not_hold_shutdown():
    """No special case for our own exporter class: any exporter's shutdown is bounded."""
    exporter = ScriptedExporter([], shutdown="hang", hang=6.0)
    processor = BoundedBatchSpanProcessor(exporter, schedule_delay=0.01)
    started = time.monotonic()
    processor.shutdown(0.1)
    assert time.monotonic() - started < 0.1 + SCHEDULING_SLACK  # the old processor waited out the 6 s hang
    assert "shutdown of ScriptedExporter: no answer" in processor.account.last_note


def test_force_flush_reports_an_exporter_flush_that_raises():
    exporter = ScriptedExporter([], flush="raise")
    processor = BoundedBatchSpanProcessor(exporter, schedule_delay=0.01)
    assert processor.force_flush(1000) is False
    assert "force_flush of ScriptedExporter: raised RuntimeError" in processor.account.last_note
    processor.shutdown(1.0)


@settings(max_examples=30, deadline=None)
@given(fault=EXPORT_FAULTS, flush=CONTROL_FAULTS, shutdown=CONTROL_FAULTS)
def test_the_fail_soft_exporter_never_raises_and_answers_within_its_bound(fault, flush, shutdown):
    inner = ScriptedExporter([fault], flush=flush, shutdown=shutdown, hang=6.0)
    exporter = FailSoftSpanExporter(inner, export_timeout=TIMEOUT, grace=0.0)
    started = time.monotonic()
    result = exporter.export([object()])  # type: ignore[list-item]
    flushed = exporter.force_flush(int(TIMEOUT * 1000))
    exporter.shutdown()
    assert time.monotonic() - started < 3 * TIMEOUT + SCHEDULING_SLACK  # none waited out a 6 s hang
    assert result is (SpanExportResult.SUCCESS if fault in ("success", "slow") else SpanExportResult.FAILURE)
    assert flushed is (flush == "ok")
    assert exporter.export([object()]) is SpanExportResult.FAILURE  # type: ignore[list-item]
    assert exporter.last_outcome.error_type == "already_shutdown"


def test_the_account_counts_under_the_sdks_self_observability_names():
    from opentelemetry.semconv._incubating.metrics import otel_metrics

    from cafe_otel._export.account import EXPORTER_SPAN_EXPORTED, PROCESSOR_SPAN_PROCESSED, Point

    assert PROCESSOR_SPAN_PROCESSED == otel_metrics.OTEL_SDK_PROCESSOR_SPAN_PROCESSED
    assert EXPORTER_SPAN_EXPORTED == otel_metrics.OTEL_SDK_EXPORTER_SPAN_EXPORTED
    account = TelemetryAccount()
    # Neither the batch size (100) nor the delay (60 s) sends anything before shutdown.
    processor = BoundedBatchSpanProcessor(ScriptedExporter(["raise"]), account=account,
                                          max_queue_size=2, max_export_batch_size=100, schedule_delay=60)
    tracer = _tracer(processor)
    for _ in range(5):  # 2 queued, 3 dropped (queue full)
        tracer.start_span("sampled").end()
    processor.shutdown(2.0)  # the one batch raises
    tracer.start_span("sampled").end()
    assert account.points() == [
        Point(EXPORTER_SPAN_EXPORTED, None, 0), Point(EXPORTER_SPAN_EXPORTED, "RuntimeError", 2),
        Point(PROCESSOR_SPAN_PROCESSED, "queue_full", 3), Point(PROCESSOR_SPAN_PROCESSED, "already_shutdown", 1),
    ]
    assert account.summary().startswith("0 spans exported, 6 dropped (2 export failed, 3 queue full, "
                                        "1 ended after shutdown)")


def test_with_a_meter_provider_the_processor_reports_the_sdks_processor_metrics():
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.semconv._incubating.metrics import otel_metrics

    from cafe_otel._export.processor_metrics import COMPONENT_TYPE, PROCESSED, QUEUE_CAPACITY, QUEUE_SIZE

    assert (PROCESSED, QUEUE_SIZE, QUEUE_CAPACITY) == (
        otel_metrics.OTEL_SDK_PROCESSOR_SPAN_PROCESSED, otel_metrics.OTEL_SDK_PROCESSOR_SPAN_QUEUE_SIZE,
        otel_metrics.OTEL_SDK_PROCESSOR_SPAN_QUEUE_CAPACITY)
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    processor = BoundedBatchSpanProcessor(InMemorySpanExporter(), max_queue_size=2, max_export_batch_size=100,
                                          schedule_delay=60, meter_provider=meters)
    tracer = _tracer(processor)
    for _ in range(5):
        tracer.start_span("sampled").end()
    queued = _points(reader)[QUEUE_SIZE]
    processor.shutdown(2.0)
    tracer.start_span("sampled").end()
    found = _points(reader)
    component = {"otel.component.type": COMPONENT_TYPE}
    # 2 queued and handed to the exporter at shutdown, 3 lost to a full queue, 1 after shutdown.
    assert found[PROCESSED] == {(): 2, ("queue_full",): 3, ("already_shutdown",): 1}
    assert found[QUEUE_CAPACITY] == {(): 2} and queued == {(): 2} and found[QUEUE_SIZE] == {(): 0}
    assert all(attrs["otel.component.type"] == component["otel.component.type"]
               and attrs["otel.component.name"].startswith(f"{COMPONENT_TYPE}/") for attrs in _attributes(reader))
    meters.shutdown()


def _metrics(reader):
    for resource in reader.get_metrics_data().resource_metrics:
        for scope in resource.scope_metrics:
            yield from scope.metrics


def _points(reader) -> dict[str, dict[tuple, int]]:
    found: dict[str, dict[tuple, int]] = {}
    for metric in _metrics(reader):
        for point in metric.data.data_points:
            key = tuple(v for k, v in point.attributes.items() if k == "error.type")
            found.setdefault(metric.name, {})[key] = point.value
    return found


def _attributes(reader):
    return [dict(point.attributes) for metric in _metrics(reader) for point in metric.data.data_points]


def test_without_a_meter_provider_the_processor_records_into_the_null_object():
    from cafe_otel._export.processor_metrics import NO_PROCESSOR_METRICS, processor_metrics

    assert processor_metrics(None, capacity=1, queue_size=lambda: 0) is NO_PROCESSOR_METRICS
    processor = BoundedBatchSpanProcessor(InMemorySpanExporter(), max_queue_size=1, schedule_delay=60)
    assert processor._metrics is NO_PROCESSOR_METRICS
    tracer = _tracer(processor)
    for _ in range(2):  # one queued, one lost to the full queue: counted, recorded nowhere
        tracer.start_span("sampled").end()
    processor.shutdown(2.0)
    tracer.start_span("sampled").end()
    assert (processor.account.exported, processor.account.dropped) == (1, 2)


class BatchCheck:
    """A `prepare` that also checks a whole batch at once, as `SpanSanitiser.each` does:
    `answer` says what `each` gives back for the batch."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.single = 0

    def __call__(self, span):
        self.single += 1
        return span

    def each(self, spans):
        return self.answer(spans)


def _through(prepare, names) -> tuple[list[str], TelemetryAccount]:
    exporter = InMemorySpanExporter()
    account = TelemetryAccount()
    processor = BoundedBatchSpanProcessor(exporter, account=account, prepare=prepare, schedule_delay=60.0)
    tracer = _tracer(processor)
    for name in names:
        tracer.start_span(name).end()
    assert processor.force_flush(5000)
    processor.shutdown(2.0)
    return [span.name for span in exporter.get_finished_spans()], account


def _raises(spans):
    raise RuntimeError("CANARY in the batch check")


def test_a_batch_check_that_raises_or_answers_for_another_count_drops_its_whole_batch_counted():
    for answer in (_raises, lambda spans: spans[:-1], lambda spans: [*spans, spans[0]]):
        check = BatchCheck(answer)
        exported, account = _through(check, ["a", "b", "c"])
        assert exported == [] and check.single == 0  # fail closed: no span of it unchecked, none asked again
        assert (account.exported, account.dropped_redaction_failed, account.dropped) == (0, 3, 3)
        assert "CANARY" not in account.summary() and "CANARY" not in (account.last_error or "")


def test_a_batch_check_drops_the_spans_it_answers_with_an_error_for_and_exports_the_rest():
    check = BatchCheck(lambda spans: [RuntimeError("CANARY") if span.name == "bad" else span for span in spans])
    exported, account = _through(check, ["ok1", "bad", "ok2", "unsampled", "bad"])
    assert exported == ["ok1", "ok2"] and check.single == 0
    assert (account.exported, account.dropped_redaction_failed, account.dropped) == (2, 2, 2)
    assert "RuntimeError" in account.last_error and "CANARY" not in account.last_error
