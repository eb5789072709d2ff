"""The persistent queue: a backend outage and a collector crash lose no accepted span.

The spans come from café shifts exported through cafe_otel. Each test runs the shifts
it counts under a service name of its own, only after Jaeger is down: all of their
spans must come from the collector's queue, and the count in Jaeger must be exact (no
loss, no duplicate) and equal to what cafe_otel's account says it exported. (Jaeger
keeps its traces in Badger on disk, so what it had before its restart is still there.)
"""

from __future__ import annotations

import time

import pytest

from otelstack import Collector, Jaeger, wait_for

from .shifts import SPANS_PER_SHIFT, Shifts, run_shifts

pytestmark = pytest.mark.e2e

# Delivery resumes within retry_on_failure.max_interval (10s) + jitter + gRPC reconnect.
DRAIN_TIMEOUT = 60.0


def assert_exact(spans: list[dict], shifts: Shifts) -> None:
    """Jaeger has every span the shifts made, once, and nothing else."""
    expected = shifts.spans
    ids = [span["spanID"] for span in spans]
    assert len(ids) == expected, f"expected {expected} spans, Jaeger has {len(ids)}"
    assert len(set(ids)) == expected, "duplicate span ids in Jaeger"
    assert {int(i, 16) for i in ids} == shifts.span_ids
    assert {int(s["traceID"], 16) for s in spans} == {int(t, 16) for t in shifts.trace_ids}


def assert_all_exported(shifts: Shifts, n: int) -> None:
    """cafe_otel handed every span the shifts made to the collector, and the collector said OK."""
    assert [run.stop_reason for run in shifts.runs] == ["answered"] * n
    assert shifts.spans == n * SPANS_PER_SHIFT
    assert shifts.account.exported == shifts.spans, shifts.summary
    assert shifts.account.dropped == 0, shifts.summary


def test_backend_outage_loses_nothing(jaeger: Jaeger, collector: Collector) -> None:
    # The path works before the outage.
    before = run_shifts(collector.otlp_grpc, "e2e-before", 2)
    assert_all_exported(before, 2)
    jaeger.wait_for_spans("e2e-before", before.spans, timeout=30)

    jaeger.stop()
    # A run of shifts while the backend is away (~6s); cafe_otel's batcher exports as they go.
    outage = run_shifts(collector.otlp_grpc, "e2e-outage", 12, between=lambda _: time.sleep(0.5))
    assert_all_exported(outage, 12)
    expected = outage.spans
    assert collector.metric("otelcol_receiver_accepted_spans") == before.account.exported + outage.account.exported
    # Every span of the outage is in the queue (its size counts spans being retried too).
    wait_for("the outage's spans in the queue", lambda: collector.metric("otelcol_exporter_queue_size") == expected, 10)
    assert collector.metric("otelcol_exporter_send_failed_spans") == 0, "a failed export was dropped"

    jaeger.start()
    spans = jaeger.wait_for_spans("e2e-outage", expected, timeout=DRAIN_TIMEOUT)
    assert_exact(spans, outage)
    assert "e2e-before" in jaeger.services()  # Badger kept what it had before the restart


def test_collector_sigkill_with_queued_data_loses_nothing(jaeger: Jaeger, collector: Collector) -> None:
    jaeger.stop()
    crash = run_shifts(collector.otlp_grpc, "e2e-crash", 20)
    assert_all_exported(crash, 20)
    expected = crash.spans
    # The receiver answered OK only after the spans were written (fsync) to the queue file;
    # they stay there, counted in the queue size, while the export to the absent Jaeger fails.
    assert collector.metric("otelcol_receiver_accepted_spans") == crash.account.exported == expected
    wait_for("all accepted spans in the queue", lambda: collector.metric("otelcol_exporter_queue_size") == expected, 10)

    collector.sigkill()
    jaeger.start()
    collector.start()  # same queue directory, same ports, now with Jaeger up
    spans = jaeger.wait_for_spans("e2e-crash", expected, timeout=DRAIN_TIMEOUT)
    assert_exact(spans, crash)
