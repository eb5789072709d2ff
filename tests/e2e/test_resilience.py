"""The persistent queue: a backend outage and a collector crash lose no accepted span.

Jaeger keeps traces in memory, so a restarted Jaeger has forgotten everything it
had. Each test therefore sends the spans it counts under a service name of its
own, only after Jaeger is down: all of them must come from the collector's
queue, and the count in Jaeger must be exact (no loss, no duplicate).
"""

from __future__ import annotations

import time

import pytest

from .spans import SPANS_PER_TRACE, emit_spans
from .stack import Collector, Jaeger, wait_for

pytestmark = pytest.mark.e2e

# Delivery resumes within retry_on_failure.max_interval (10s) + jitter + gRPC reconnect.
DRAIN_TIMEOUT = 60.0


def assert_exact(spans: list[dict], expected: int) -> None:
    ids = [span["spanID"] for span in spans]
    assert len(ids) == expected, f"expected {expected} spans, Jaeger has {len(ids)}"
    assert len(set(ids)) == expected, "duplicate span ids in Jaeger"


def test_backend_outage_loses_nothing(jaeger: Jaeger, collector: Collector) -> None:
    # The path works before the outage.
    emit_spans(collector.otlp_grpc, "e2e-before", 2)
    jaeger.wait_for_spans("e2e-before", 2 * SPANS_PER_TRACE, timeout=30)

    jaeger.stop()
    traces = 0
    for _ in range(4):  # a run of shifts while the backend is away (~6s)
        emit_spans(collector.otlp_grpc, "e2e-outage", 5)
        traces += 5
        time.sleep(1.5)
    expected = traces * SPANS_PER_TRACE
    # Every span of the outage is in the queue (its size counts spans being retried too).
    wait_for("the outage's spans in the queue", lambda: collector.metric("otelcol_exporter_queue_size") == expected, 10)
    assert collector.metric("otelcol_exporter_send_failed_spans") == 0, "a failed export was dropped"

    jaeger.start()
    assert_exact(jaeger.wait_for_spans("e2e-outage", expected, timeout=DRAIN_TIMEOUT), expected)
    assert "e2e-before" not in jaeger.services()  # in-memory Jaeger really restarted


def test_collector_sigkill_with_queued_data_loses_nothing(jaeger: Jaeger, collector: Collector) -> None:
    jaeger.stop()
    emit_spans(collector.otlp_grpc, "e2e-crash", 20)
    expected = 20 * SPANS_PER_TRACE
    # The receiver answered OK only after the spans were written (fsync) to the queue file;
    # they stay there, counted in the queue size, while the export to the absent Jaeger fails.
    assert collector.metric("otelcol_receiver_accepted_spans") == expected
    wait_for("all accepted spans in the queue", lambda: collector.metric("otelcol_exporter_queue_size") == expected, 10)

    collector.sigkill()
    jaeger.start()
    collector.start()  # same queue directory, same ports, now with Jaeger up
    assert_exact(jaeger.wait_for_spans("e2e-crash", expected, timeout=DRAIN_TIMEOUT), expected)
