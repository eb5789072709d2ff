"""The telemetry account: what was shipped and what was lost, and why.

Every place that can lose a span or a metric data point counts it here, so the report at
exit is honest. The last error is a short text of our own making (operation, exporter class,
endpoint, exception class): never an exception message that could echo span content.

The counts are kept under one key, `(signal, stage, error_type)`, the shape of the SDK's own
self-observability metrics (semconv `otel.sdk.*`), so `points()` reads them as they are:
- stage `processed`: a span lost before it reached the exporter,
  `otel.sdk.processor.span.processed` with an `error.type` (`queue_full` and
  `already_shutdown` are the SDK's values; `shutdown_timeout` and `redaction_failed` ours);
- stage `exported`: an export's outcome, `otel.sdk.exporter.span.exported` (and
  `otel.sdk.exporter.metric_data_point.exported`, counted in data points: a cumulative point
  goes out again at every export), without `error.type` when delivered, else with its cause
  (`timeout`, `busy`, `failure`, `already_shutdown` or the exception's class name, as the
  SDK's exporters name it; `rejected` for what a receiver reported rejected in a 2xx answer,
  as the conventions ask);
- stage `inflight`: `unconfirmed`, as the SDK's `otel.sdk.exporter.span.inflight` (and
  `...metric_data_point.inflight`) counts what was handed to the exporter and has no outcome yet.

Three outcomes, never two. An export still in flight when shutdown's bound ran out is
settled by its attempts at the transport (`cafe_otel._export.attempts`, through the one
settle step in `cafe_otel._export.settle`):
- `unconfirmed`, neither delivered nor lost, when a receiver may yet store all of it: an
  attempt was sent and not answered, or one ended without saying whether it arrived (a
  timeout after sending, a connection dropped mid-answer), or nothing could be seen at the
  transport (an exporter of the caller's own);
- dropped, as export failed under the last failure's kind (`ConnectionError`,
  `UNAVAILABLE`, an HTTP status), when no attempt was out and every one ended before
  reaching a receiver or was refused by it: the exporter was only waiting to retry, and no
  attempt leaves after the bound, so nothing of it is delivered before exit;
- dropped, as export failed under `shutdown_timeout`, when no attempt had started;
- exported when its last attempt was answered success and only the exporter's return was
  still to come.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from cafe_otel._config.variables import Signal

PROCESSOR_SPAN_PROCESSED = "otel.sdk.processor.span.processed"
EXPORTER_SPAN_EXPORTED = "otel.sdk.exporter.span.exported"
EXPORTER_METRIC_POINTS_EXPORTED = "otel.sdk.exporter.metric_data_point.exported"
EXPORTER_SPAN_INFLIGHT = "otel.sdk.exporter.span.inflight"
EXPORTER_METRIC_POINTS_INFLIGHT = "otel.sdk.exporter.metric_data_point.inflight"

QUEUE_FULL = "queue_full"
ALREADY_SHUTDOWN = "already_shutdown"
SHUTDOWN_TIMEOUT = "shutdown_timeout"
REDACTION_FAILED = "redaction_failed"
FAILURE = "failure"  # the exporter returned FAILURE and said no more
REJECTED = "rejected"  # the receiver took the request but rejected these (OTLP partial success)

Stage = Literal["processed", "exported", "inflight"]
PROCESSED: Stage = "processed"  # lost before the exporter saw it (always with an error type)
EXPORTED: Stage = "exported"  # an export's outcome: delivered (no error type) or lost for one
INFLIGHT: Stage = "inflight"  # handed to an export that had no outcome when the wait ended
Key = tuple[Signal, Stage, str | None]

# The SDK's self-observability metric of each signal and stage; a metric export has no
# processor stage (the reader hands every point to the exporter).
METRIC_NAMES: Mapping[tuple[Signal, Stage], str] = {
    ("traces", PROCESSED): PROCESSOR_SPAN_PROCESSED,
    ("traces", EXPORTED): EXPORTER_SPAN_EXPORTED,
    ("traces", INFLIGHT): EXPORTER_SPAN_INFLIGHT,
    ("metrics", EXPORTED): EXPORTER_METRIC_POINTS_EXPORTED,
    ("metrics", INFLIGHT): EXPORTER_METRIC_POINTS_INFLIGHT,
}
# The order the processor's causes are listed in, here and in the summary.
PROCESSOR_CAUSES = (QUEUE_FULL, ALREADY_SHUTDOWN, SHUTDOWN_TIMEOUT, REDACTION_FAILED)


@dataclass(frozen=True)
class Point:
    """One count under the SDK's metric name; `error_type` None means delivered."""

    name: str
    error_type: str | None
    value: int


@dataclass(frozen=True)
class AccountSnapshot:
    """The account at one moment: every count under its `(signal, stage, error_type)` key."""

    counts: Mapping[Key, int]
    listener_errors: int = 0  # listeners of the tracer (spans, metrics) that raised
    last_error: str | None = None
    metrics_enabled: bool = False

    def count(self, signal: Signal, stage: Stage, error_type: str | None = None) -> int:
        return self.counts.get((signal, stage, error_type), 0)

    def by_type(self, signal: Signal, stage: Stage) -> dict[str, int]:
        """The signal's losses at `stage`, by error type."""
        return {kind: n for (found, at, kind), n in self.counts.items()
                if found == signal and at == stage and kind is not None}

    def lost(self, signal: Signal) -> int:
        return sum(n for (found, stage, kind), n in self.counts.items()
                   if found == signal and stage != INFLIGHT and kind is not None)

    @property
    def exported(self) -> int:
        return self.count("traces", EXPORTED)

    @property
    def export_failed_by_type(self) -> dict[str, int]:
        return self.by_type("traces", EXPORTED)

    @property
    def dropped_export_failed(self) -> int:
        return sum(self.export_failed_by_type.values())

    @property
    def dropped_queue_full(self) -> int:
        return self.count("traces", PROCESSED, QUEUE_FULL)

    @property
    def dropped_after_shutdown(self) -> int:
        return self.count("traces", PROCESSED, ALREADY_SHUTDOWN)

    @property
    def dropped_unflushed(self) -> int:
        return self.count("traces", PROCESSED, SHUTDOWN_TIMEOUT)

    @property
    def dropped_redaction_failed(self) -> int:
        return self.count("traces", PROCESSED, REDACTION_FAILED)

    @property
    def dropped(self) -> int:
        return self.lost("traces")

    @property
    def unconfirmed(self) -> int:
        """Spans whose export had no answer yet when shutdown's bound ran out."""
        return self.count("traces", INFLIGHT)

    @property
    def metric_points_exported(self) -> int:
        return self.count("metrics", EXPORTED)

    @property
    def metric_points_dropped_by_type(self) -> dict[str, int]:
        return self.by_type("metrics", EXPORTED)

    @property
    def metric_points_dropped(self) -> int:
        return self.lost("metrics")

    @property
    def metric_points_unconfirmed(self) -> int:
        return self.count("metrics", INFLIGHT)

    @property
    def mirror_errors(self) -> int:
        """`listener_errors` under its first name, kept for existing callers."""
        return self.listener_errors

    def points(self) -> list[Point]:
        found = self._signal_points("traces")
        if self.metrics_enabled:
            found += self._signal_points("metrics")
        return found

    def _signal_points(self, signal: Signal) -> list[Point]:
        exported = METRIC_NAMES[(signal, EXPORTED)]
        found = [Point(exported, None, self.count(signal, EXPORTED))]
        found += [Point(exported, kind, n) for kind, n in sorted(self.by_type(signal, EXPORTED).items())]
        processed = METRIC_NAMES.get((signal, PROCESSED))
        if processed is not None:
            found += [Point(processed, kind, n) for kind, n in _in_cause_order(self.by_type(signal, PROCESSED))]
        if self.count(signal, INFLIGHT):
            found.append(Point(METRIC_NAMES[(signal, INFLIGHT)], None, self.count(signal, INFLIGHT)))
        return found


def _in_cause_order(lost: dict[str, int]) -> list[tuple[str, int]]:
    known = [(kind, lost[kind]) for kind in PROCESSOR_CAUSES if lost.get(kind)]
    return known + sorted((kind, n) for kind, n in lost.items() if kind not in PROCESSOR_CAUSES and n)


class TelemetryAccount:
    """Thread-safe counters; the exporter threads, the application thread and shutdown all
    write here, through `add` (or its shorthands for the places that lose a span)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[Key, int] = {}
        self._listener_errors = 0
        self._last_error: str | None = None
        self._last_note: str | None = None
        self._withheld: dict[str, int] = {}
        self._metrics_enabled = False
        self._unconfirmed_why: str | None = None

    def enable_metrics(self) -> None:
        """A metrics pipeline exists: the report counts its data points too."""
        with self._lock:
            self._metrics_enabled = True

    def add(self, signal: Signal, stage: Stage, count: int, error_type: str | None = None,
            why: str | None = None) -> None:
        """Count `count` items of `signal` at `stage`: delivered (`error_type` None, stage
        `exported`), lost for `error_type`, or unconfirmed (stage `inflight`). `why` is a short
        text of ours: the last error for a loss, the reason it is unknown for unconfirmed."""
        with self._lock:
            key = (signal, stage, error_type)
            self._counts[key] = self._counts.get(key, 0) + count
            if why is not None and stage == INFLIGHT:
                self._unconfirmed_why = why
            elif why is not None:
                self._last_error = why

    def add_export_failed(self, count: int, error: str, error_type: str = FAILURE) -> None:
        """Spans lost in or after the export (the processors' shorthand)."""
        self.add("traces", EXPORTED, count, error_type, error)

    def add_redaction_failed(self, error: str) -> None:
        """One span the metadata-only check could not check, dropped (it fails closed)."""
        self.add("traces", PROCESSED, 1, REDACTION_FAILED, error)

    def add_listener_error(self, error: str) -> None:
        """A listener (the tracer's span or metrics listener, the metrics reader) raised; the
        shift went on."""
        with self._lock:
            self._listener_errors += 1
            self._last_error = error

    # `add_listener_error` under its first name, kept for existing callers.
    add_mirror_error = add_listener_error

    def add_withheld(self, field: str) -> None:
        """A value that did not fit its declared shape was withheld from a span (the span
        itself went on). Counted by key or field name; the value is never kept."""
        with self._lock:
            self._withheld[field] = self._withheld.get(field, 0) + 1

    @property
    def withheld(self) -> dict[str, int]:
        with self._lock:
            return dict(self._withheld)

    def note_error(self, error: str) -> None:
        """A failure that lost nothing (a flush or shutdown that did not answer): kept
        apart so that it does not hide the error that did lose spans."""
        with self._lock:
            self._last_note = error

    def snapshot(self) -> AccountSnapshot:
        with self._lock:
            return AccountSnapshot(dict(self._counts), self._listener_errors, self._last_error,
                                   self._metrics_enabled)

    def points(self) -> list[Point]:
        """The counts under the SDK's self-observability metric names and error types."""
        return self.snapshot().points()

    @property
    def exported(self) -> int:
        return self.snapshot().exported

    @property
    def unconfirmed(self) -> int:
        return self.snapshot().unconfirmed

    @property
    def dropped_export_failed(self) -> int:
        return self.snapshot().dropped_export_failed

    @property
    def dropped_queue_full(self) -> int:
        return self.snapshot().dropped_queue_full

    @property
    def dropped_redaction_failed(self) -> int:
        return self.snapshot().dropped_redaction_failed

    @property
    def dropped_unflushed(self) -> int:
        return self.snapshot().dropped_unflushed

    @property
    def dropped_after_shutdown(self) -> int:
        return self.snapshot().dropped_after_shutdown

    @property
    def dropped(self) -> int:
        return self.snapshot().dropped

    @property
    def last_error(self) -> str | None:
        return self.snapshot().last_error

    @property
    def last_note(self) -> str | None:
        with self._lock:
            return self._last_note

    def summary(self) -> str:
        s = self.snapshot()
        with self._lock:
            note, unconfirmed_why = self._last_note, self._unconfirmed_why
        line = f"{s.exported} spans exported, {s.dropped} dropped"
        if s.unconfirmed:
            line += f", {s.unconfirmed} unconfirmed"
        rejected = s.export_failed_by_type.get(REJECTED, 0)
        reasons = [f"{n} {label}" for n, label in (
            (s.dropped_export_failed - rejected, "export failed"), (rejected, "rejected by the receiver"),
            (s.dropped_queue_full, "queue full"),
            (s.dropped_redaction_failed, "redaction failed"), (s.dropped_unflushed, "not flushed in time"),
            (s.dropped_after_shutdown, "ended after shutdown"),
        ) if n]
        if reasons:
            line += " (" + ", ".join(reasons) + ")"
        if s.listener_errors:
            line += f", {s.listener_errors} listener errors"
        withheld = sum(self.withheld.values())
        if withheld:
            line += f", {withheld} values withheld (not metadata-shaped)"
        if s.metrics_enabled:
            line += f"; {s.metric_points_exported} metric points exported, {s.metric_points_dropped} dropped"
            if s.metric_points_unconfirmed:
                line += f", {s.metric_points_unconfirmed} unconfirmed"
        if unconfirmed_why and (s.unconfirmed or s.metric_points_unconfirmed):
            line += f" (unconfirmed: {unconfirmed_why})"
        if s.last_error and (s.dropped or s.listener_errors or s.metric_points_dropped):
            line += f"; last error: {s.last_error}"
        elif note:
            line += f"; note: {note}"
        return line

    def __repr__(self) -> str:
        return f"TelemetryAccount({self.summary()})"
