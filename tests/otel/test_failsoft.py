"""Acceptance: a broken exporter or a dead collector costs the shift nothing, shutdown
returns within its bound, and the account says what was lost and why."""

from __future__ import annotations

import threading
import time

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cafe_otel import BatchOptions, BoundedBatchSpanProcessor, FailSoftSpanExporter, TelemetryAccount, configure
from cafe_otel._export.failsoft import GRACE_SECONDS

from .conftest import closed_port, seed_shift

SHIFT_SPANS = 17  # the seed shift: invoke_agent, setup, 5 turns, 5 chats, 4 tools, wrapup
SECRET = "CANARY-in-the-error-message"


class RaisingExporter(SpanExporter):
    def export(self, spans):
        raise RuntimeError(SECRET)

    def shutdown(self):
        raise RuntimeError(SECRET)


class HangingExporter(SpanExporter):
    """Blocks in export (and shutdown) until released; counts the calls it got."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def export(self, spans):
        self.calls += 1
        self.release.wait(30)
        return SpanExportResult.SUCCESS

    def shutdown(self):
        self.release.wait(30)


def _shift_then_shutdown(handle, bound: float) -> tuple[str, float, float]:
    started = time.monotonic()
    run = seed_shift(handle.tracer())
    shift_seconds = time.monotonic() - started
    started = time.monotonic()
    handle.shutdown(bound)
    return run.stop_reason, shift_seconds, time.monotonic() - started


def test_an_exporter_that_raises():
    handle = configure(exporter=RaisingExporter(), environ={}, batch=BatchOptions(export_timeout=1.0))
    stop_reason, _shift_seconds, shutdown_seconds = _shift_then_shutdown(handle, 2.0)
    assert stop_reason == "answered"
    assert shutdown_seconds < 2.5
    account = handle.account
    assert (account.exported, account.dropped, account.dropped_export_failed) == (0, SHIFT_SPANS, SHIFT_SPANS)
    assert "exporter raised RuntimeError" in account.last_error
    assert SECRET not in account.last_error and SECRET not in account.summary()
    assert f"0 spans exported, {SHIFT_SPANS} dropped" in account.summary()


def test_an_exporter_that_hangs():
    hanging = HangingExporter()
    try:
        handle = configure(exporter=hanging, environ={}, batch=BatchOptions(export_timeout=0.5, schedule_delay=0.05))
        stop_reason, shift_seconds, shutdown_seconds = _shift_then_shutdown(handle, 1.5)
        assert stop_reason == "answered"
        assert shift_seconds < 1.0  # the shift never waits on the exporter
        assert shutdown_seconds < 2.0
        account = handle.account
        assert account.exported == 0
        assert account.dropped == SHIFT_SPANS
        assert "no answer within 0.5s" in account.last_error or "in flight" in account.last_error
        assert hanging.calls == 1  # hung once: later batches were dropped, not piled up
    finally:
        hanging.release.set()


def test_a_hung_export_does_not_pile_up_threads():
    hanging = HangingExporter()
    exporter = FailSoftSpanExporter(hanging, export_timeout=0.2, grace=0.0)
    try:
        results = [exporter.export([object()] * 3) for _ in range(5)]  # type: ignore[list-item]
        assert results == [SpanExportResult.FAILURE] * 5
        assert hanging.calls == 1
        assert exporter.last_outcome.error_type == "busy"
        started = time.monotonic()
        exporter.shutdown(timeout=0.3)
        assert time.monotonic() - started < 0.6
    finally:
        hanging.release.set()


class SlowExporter(SpanExporter):
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def export(self, spans):
        time.sleep(self.seconds)
        return SpanExportResult.SUCCESS


def _spans_through(processor, count: int) -> None:
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    for number in range(count):
        tracer.start_span(f"span {number}").end()


def test_a_late_answer_is_not_counted_twice():
    account = TelemetryAccount()
    batch = BoundedBatchSpanProcessor(SlowExporter(0.1 + GRACE_SECONDS + 0.3), account=account,
                                      export_timeout=0.1, schedule_delay=0.01)
    _spans_through(batch, 2)
    assert batch.force_flush(2000) is True  # the worker gave up on the export and moved on
    assert (account.exported, account.dropped) == (0, 2)
    time.sleep(0.5)  # the slow export answers SUCCESS now, after it was counted as lost
    assert (account.exported, account.dropped) == (0, 2)
    batch.shutdown(1.0)


def test_an_answer_at_the_inner_exporters_own_deadline_counts_as_exported():
    """The inner exporter gets the same timeout and starts its clock a little later: an
    export it completes right at that deadline was accepted and must not count as lost."""
    account = TelemetryAccount()
    batch = BoundedBatchSpanProcessor(SlowExporter(0.1 + GRACE_SECONDS / 2), account=account,
                                      export_timeout=0.1, schedule_delay=0.01)
    _spans_through(batch, 2)
    batch.shutdown(2.0)
    assert (account.exported, account.dropped) == (2, 0)


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_an_otlp_endpoint_on_a_closed_port(protocol):
    port = closed_port()
    endpoint = f"http://127.0.0.1:{port}"
    handle = configure(endpoint=endpoint, protocol=protocol, environ={},
                       batch=BatchOptions(export_timeout=1.0, schedule_delay=0.05))
    stop_reason, shift_seconds, shutdown_seconds = _shift_then_shutdown(handle, 3.0)
    assert stop_reason == "answered"
    assert shift_seconds < 1.0
    assert shutdown_seconds < 3.5
    account = handle.account
    assert account.exported == 0
    assert account.dropped == SHIFT_SPANS
    assert f"127.0.0.1:{port}" in account.last_error
    assert protocol in account.last_error
    assert f"{SHIFT_SPANS} dropped" in account.summary()


def test_a_full_queue_drops_and_counts():
    sink = InMemorySpanExporter()
    account = TelemetryAccount()
    batch = BoundedBatchSpanProcessor(sink, account=account,
                                      max_queue_size=4, max_export_batch_size=100, schedule_delay=60)
    provider = TracerProvider()
    provider.add_span_processor(batch)
    run = seed_shift(__import__("cafe_otel").OTelTracer(provider, account=account))
    assert run.stop_reason == "answered"
    assert account.dropped_queue_full == SHIFT_SPANS - 4
    batch.shutdown(timeout=2.0)
    assert len(sink.get_finished_spans()) == 4
    assert account.exported == 4
    assert "queue full" in account.summary()


def test_force_flush_returns_within_its_bound_while_an_export_hangs():
    hanging = HangingExporter()
    try:
        handle = configure(exporter=hanging, environ={}, batch=BatchOptions(export_timeout=5.0, schedule_delay=0.01))
        seed_shift(handle.tracer())
        started = time.monotonic()
        assert handle.force_flush(0.3) is False
        assert time.monotonic() - started < 0.8
        started = time.monotonic()
        handle.shutdown(0.5)
        assert time.monotonic() - started < 1.0
        # The hung export never answered: neither delivered nor lost.
        assert (handle.account.unconfirmed, handle.account.dropped, handle.account.exported) == (SHIFT_SPANS, 0, 0)
    finally:
        hanging.release.set()


def test_shutdown_twice_and_spans_after_shutdown_are_counted():
    handle = configure(exporter=InMemorySpanExporter(), environ={})
    seed_shift(handle.tracer())
    handle.shutdown(2.0)
    assert handle.account.exported == SHIFT_SPANS
    assert handle.shutdown(2.0) == 0.0


@pytest.mark.parametrize("configured", [0.2, 1.2])
def test_shutdown_without_an_argument_keeps_the_configured_bound(configured):
    hanging = HangingExporter()
    try:
        handle = configure(exporter=hanging, environ={},
                           batch=BatchOptions(export_timeout=5.0, schedule_delay=0.01, shutdown_timeout=configured))
        seed_shift(handle.tracer())
        took = handle.shutdown()
        assert configured - 0.05 <= took < configured + 0.6
        assert handle.account.unconfirmed == SHIFT_SPANS  # the hung export never answered
    finally:
        hanging.release.set()
