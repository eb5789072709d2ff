"""The telemetry account: what was shipped and what was lost, and why.

Every place that can lose a span counts it here, so the report at exit is honest. The
last error is a short text of our own making (operation, exporter class, endpoint,
exception class): never an exception message that could echo span content.

The counts line up with the SDK's own self-observability metrics (semconv `otel.sdk.*`):
a span lost before it reached the exporter is `otel.sdk.processor.span.processed` with an
`error.type` (`queue_full` and `already_shutdown` are the SDK's values; `shutdown_timeout`
and `redaction_failed` are ours); an export's outcome is `otel.sdk.exporter.span.exported`,
without `error.type` when delivered, else with its cause (`timeout`, `busy`, `failure`,
`already_shutdown` or the exception's class name, as the SDK's exporters name it; `rejected`
for what a receiver reported rejected in a 2xx answer, as the conventions ask).
A metric export's outcome is `otel.sdk.exporter.metric_data_point.exported`, counted in
data points (a cumulative point goes out again at every export), with the same causes.
`points()` gives them under those names.

Three outcomes, never two. An export still in flight when shutdown's bound ran out is
settled by its attempts at the transport (`cafe_otel._export.attempts`):
- `unconfirmed`, neither delivered nor lost, when a receiver may yet store all of it: an
  attempt was sent and not answered, or one ended without saying whether it arrived (a
  timeout after sending, a connection dropped mid-answer), or nothing could be seen at the
  transport (an exporter of the caller's own). It is counted as the SDK's
  `otel.sdk.exporter.span.inflight` (and `...metric_data_point.inflight`) counts what was
  handed to the exporter and has no outcome yet;
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
from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class Point:
    """One count under the SDK's metric name; `error_type` None means delivered."""

    name: str
    error_type: str | None
    value: int


@dataclass(frozen=True)
class AccountSnapshot:
    exported: int
    dropped_export_failed: int
    dropped_queue_full: int
    dropped_redaction_failed: int
    dropped_unflushed: int
    mirror_errors: int
    last_error: str | None
    dropped_after_shutdown: int = 0
    export_failed_by_type: dict[str, int] = field(default_factory=dict)
    metrics_enabled: bool = False
    metric_points_exported: int = 0
    metric_points_dropped_by_type: dict[str, int] = field(default_factory=dict)
    unconfirmed: int = 0  # spans whose export had no answer yet when shutdown's bound ran out
    metric_points_unconfirmed: int = 0

    @property
    def metric_points_dropped(self) -> int:
        return sum(self.metric_points_dropped_by_type.values())

    @property
    def dropped(self) -> int:
        return (self.dropped_export_failed + self.dropped_queue_full + self.dropped_redaction_failed
                + self.dropped_unflushed + self.dropped_after_shutdown)

    def points(self) -> list[Point]:
        found = [Point(EXPORTER_SPAN_EXPORTED, None, self.exported)]
        found += [Point(EXPORTER_SPAN_EXPORTED, kind, n) for kind, n in sorted(self.export_failed_by_type.items())]
        found += [Point(PROCESSOR_SPAN_PROCESSED, kind, n) for kind, n in (
            (QUEUE_FULL, self.dropped_queue_full), (ALREADY_SHUTDOWN, self.dropped_after_shutdown),
            (SHUTDOWN_TIMEOUT, self.dropped_unflushed), (REDACTION_FAILED, self.dropped_redaction_failed),
        ) if n]
        if self.unconfirmed:
            found.append(Point(EXPORTER_SPAN_INFLIGHT, None, self.unconfirmed))
        if self.metrics_enabled:
            found.append(Point(EXPORTER_METRIC_POINTS_EXPORTED, None, self.metric_points_exported))
            found += [Point(EXPORTER_METRIC_POINTS_EXPORTED, kind, n)
                      for kind, n in sorted(self.metric_points_dropped_by_type.items())]
            if self.metric_points_unconfirmed:
                found.append(Point(EXPORTER_METRIC_POINTS_INFLIGHT, None, self.metric_points_unconfirmed))
        return found


class TelemetryAccount:
    """Thread-safe counters; the exporter thread, the application thread and shutdown all
    write here."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._exported = 0
        self._export_failed: dict[str, int] = {}
        self._queue_full = 0
        self._after_shutdown = 0
        self._redaction_failed = 0
        self._unflushed = 0
        self._mirror_errors = 0
        self._last_error: str | None = None
        self._last_note: str | None = None
        self._withheld: dict[str, int] = {}
        self._metrics_enabled = False
        self._metric_points_exported = 0
        self._metric_points_dropped: dict[str, int] = {}
        self._unconfirmed = 0
        self._metric_points_unconfirmed = 0
        self._unconfirmed_why: str | None = None

    def enable_metrics(self) -> None:
        """A metrics pipeline exists: the report counts its data points too."""
        with self._lock:
            self._metrics_enabled = True

    def add_metric_points_exported(self, count: int) -> None:
        with self._lock:
            self._metric_points_exported += count

    def add_metric_points_dropped(self, count: int, error: str, error_type: str = FAILURE) -> None:
        with self._lock:
            self._metric_points_dropped[error_type] = self._metric_points_dropped.get(error_type, 0) + count
            self._last_error = error

    def add_unconfirmed(self, count: int, why: str) -> None:
        """Spans handed to an export that had not answered when the wait for it ended:
        neither delivered nor lost. `why` is a short text of ours (the bound that ran out)."""
        with self._lock:
            self._unconfirmed += count
            self._unconfirmed_why = why

    def add_metric_points_unconfirmed(self, count: int, why: str) -> None:
        with self._lock:
            self._metric_points_unconfirmed += count
            self._unconfirmed_why = why

    @property
    def unconfirmed(self) -> int:
        return self.snapshot().unconfirmed

    def add_exported(self, count: int) -> None:
        with self._lock:
            self._exported += count

    def add_export_failed(self, count: int, error: str, error_type: str = FAILURE) -> None:
        with self._lock:
            self._export_failed[error_type] = self._export_failed.get(error_type, 0) + count
            self._last_error = error

    def add_queue_full(self, count: int = 1) -> None:
        with self._lock:
            self._queue_full += count
            self._last_error = "span queue full: spans dropped before export"

    def add_after_shutdown(self, count: int = 1) -> None:
        with self._lock:
            self._after_shutdown += count
            self._last_error = "span ended after telemetry shutdown; dropped"

    def add_redaction_failed(self, error: str) -> None:
        with self._lock:
            self._redaction_failed += 1
            self._last_error = error

    def add_unflushed(self, count: int, error: str) -> None:
        with self._lock:
            self._unflushed += count
            self._last_error = error

    def add_mirror_error(self, error: str) -> None:
        with self._lock:
            self._mirror_errors += 1
            self._last_error = error

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
        """A failure that lost no span (a flush or shutdown that did not answer): kept
        apart so that it does not hide the error that did lose spans."""
        with self._lock:
            self._last_note = error

    def snapshot(self) -> AccountSnapshot:
        with self._lock:
            return AccountSnapshot(self._exported, sum(self._export_failed.values()), self._queue_full,
                                   self._redaction_failed, self._unflushed, self._mirror_errors,
                                   self._last_error, self._after_shutdown, dict(self._export_failed),
                                   self._metrics_enabled, self._metric_points_exported,
                                   dict(self._metric_points_dropped), self._unconfirmed,
                                   self._metric_points_unconfirmed)

    def points(self) -> list[Point]:
        """The counts under the SDK's self-observability metric names and error types."""
        return self.snapshot().points()

    @property
    def exported(self) -> int:
        return self.snapshot().exported

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
        if s.mirror_errors:
            line += f", {s.mirror_errors} mirror errors"
        withheld = sum(self.withheld.values())
        if withheld:
            line += f", {withheld} values withheld (not metadata-shaped)"
        if s.metrics_enabled:
            line += f"; {s.metric_points_exported} metric points exported, {s.metric_points_dropped} dropped"
            if s.metric_points_unconfirmed:
                line += f", {s.metric_points_unconfirmed} unconfirmed"
        if unconfirmed_why and (s.unconfirmed or s.metric_points_unconfirmed):
            line += f" (unconfirmed: {unconfirmed_why})"
        if s.last_error and (s.dropped or s.mirror_errors or s.metric_points_dropped):
            line += f"; last error: {s.last_error}"
        elif note:
            line += f"; note: {note}"
        return line

    def __repr__(self) -> str:
        return f"TelemetryAccount({self.summary()})"
