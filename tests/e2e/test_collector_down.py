"""The Collector down while shifts run: cafe_otel's export boundary, against the real thing.

A stopped Collector leaves a closed 127.0.0.1 port: the OTLP/gRPC exporter gets
UNAVAILABLE and retries with backoff within its own timeout (`export_timeout`). The
shifts must not wait for any of that (the export runs on cafe_otel's worker), the
handle's shutdown must return within its bound, and the account must say exactly
what was lost. A Collector that comes back within the exporter's timeout loses nothing.
"""

from __future__ import annotations

import logging
import statistics
import time

import pytest

from otelstack import Collector, Jaeger

from .shifts import SPANS_PER_SHIFT, run_shifts

pytestmark = pytest.mark.e2e

SHIFTS = 5
PAUSE = 0.2  # between shifts, so that an export is in flight while later shifts run
SCHEDULE_DELAY = 0.05  # export each shift's spans right after it
# Generous: a shift takes milliseconds; one that waited for the exporter's first retry
# backoff (~1s) would be over it.
SHIFT_SLACK = 0.5
SHUTDOWN_SLACK = 1.0
EXPORTER_LOGGER = "opentelemetry.exporter.otlp.proto.grpc.exporter"


def test_collector_down_shifts_finish_on_time_and_the_account_counts_the_loss(
    jaeger: Jaeger, collector: Collector
) -> None:
    endpoint = collector.otlp_grpc
    # Longer than the shutdown bound + slack: the exporter keeps retrying (attempts at about
    # 0, 1, 3 and 7 s) well past the shutdown, so only a bounded shutdown passes.
    export_timeout = 10.0
    up = run_shifts(
        endpoint,
        "e2e-up",
        SHIFTS,
        schedule_delay=SCHEDULE_DELAY,
        export_timeout=export_timeout,
        between=lambda _: time.sleep(PAUSE),
    )
    assert up.account.exported == up.spans and up.account.dropped == 0, up.summary

    collector.stop()
    bound = 1.0
    down = run_shifts(
        endpoint,
        "e2e-down",
        SHIFTS,
        schedule_delay=SCHEDULE_DELAY,
        export_timeout=export_timeout,
        between=lambda _: time.sleep(PAUSE),
        shutdown_bound=bound,
    )

    # Each shift completed, with the same stop reason as with the Collector up ...
    assert [run.stop_reason for run in down.runs] == [run.stop_reason for run in up.runs] == ["answered"] * SHIFTS
    assert down.spans == up.spans == SHIFTS * SPANS_PER_SHIFT
    # ... in about the same time (medians; the bound is generous, not a benchmark).
    up_median, down_median = statistics.median(up.shift_seconds), statistics.median(down.shift_seconds)
    assert down_median - up_median < SHIFT_SLACK, (up.shift_seconds, down.shift_seconds)
    # The shutdown returned within its bound although an export was still retrying.
    assert down.shutdown_seconds < bound + SHUTDOWN_SLACK, down.shutdown_seconds
    # The account: every span made is lost, none exported, and the last error names where to.
    assert down.account.exported == 0, down.summary
    assert down.account.dropped == down.spans, down.summary
    assert down.account.last_error is not None and endpoint in down.account.last_error, down.summary
    assert f"{down.spans} dropped" in down.summary


def test_collector_back_within_the_export_timeout_loses_nothing(
    jaeger: Jaeger, collector: Collector, caplog: pytest.LogCaptureFixture
) -> None:
    export_timeout = 15.0
    collector.stop()
    restarted_after: list[float] = []

    def restart() -> None:
        # Long enough for the first export attempt (after SCHEDULE_DELAY) to hit the
        # closed port; the exporter is now waiting out its backoff.
        began = time.monotonic()
        time.sleep(1.5)
        collector.start()
        restarted_after.append(time.monotonic() - began)

    with caplog.at_level(logging.WARNING, logger=EXPORTER_LOGGER):
        shifts = run_shifts(
            collector.otlp_grpc,
            "e2e-back",
            1,
            schedule_delay=SCHEDULE_DELAY,
            export_timeout=export_timeout,
            after_shifts=restart,
            shutdown_bound=export_timeout + 5.0,
        )

    # The export really was attempted while the Collector was down, and retried.
    retries = [r for r in caplog.records if r.name == EXPORTER_LOGGER and "Transient error" in r.getMessage()]
    assert retries, "no export attempt failed while the Collector was down: the test proved nothing"
    assert restarted_after[0] < export_timeout
    assert shifts.runs[0].stop_reason == "answered"
    assert shifts.account.dropped == 0, shifts.summary
    assert shifts.account.exported == shifts.spans == SPANS_PER_SHIFT, shifts.summary
    assert collector.metric("otelcol_receiver_accepted_spans") == shifts.spans

    spans = jaeger.wait_for_spans("e2e-back", shifts.spans, timeout=30)
    ids = [span["spanID"] for span in spans]
    assert len(ids) == len(set(ids)) == shifts.spans
    assert {int(i, 16) for i in ids} == shifts.span_ids
    assert {int(s["traceID"], 16) for s in spans} == {int(shifts.trace_ids[0], 16)}
