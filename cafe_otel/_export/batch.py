"""`BoundedBatchSpanProcessor`: batching whose every span is counted and whose waits end.

Why our own rather than the SDK's `BatchSpanProcessor` (1.45): that one ignores its
exporter's result and only logs an exporter that raises, so a failed batch is lost without
a count anyone can read; its queue-full and after-shutdown drops are logged and, only with
`OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED=true` and a meter provider, counted in the
`otel.sdk.processor.span.processed` metric, which is not readable back in process;
`force_flush` ignores its timeout and a hung exporter holds it, and `shutdown()` can block
for 30 s. Ours has a bounded, non-blocking queue (a full queue drops the new span and counts
it), one daemon worker, and puts every exporter call (export, force_flush, shutdown) through
the fail-soft boundary, so an exporter that raises, hangs or fails costs a count, never the
worker. Every sampled span handed to `on_end` is settled exactly once: exported, or dropped
with a cause, or unconfirmed when shutdown's bound ends before its export answers and the
attempts counted at the transport (`cafe_otel._export.attempts`) leave its delivery unknown (see
`cafe_otel._export.account`), whatever the exporter does. The boundary is the one every exporter
call of ours goes through (`cafe_otel._export.failsoft.ExportBoundary`), and an export's outcome
is counted by the settle step metric exports share (`cafe_otel._export.settle`).

`prepare` (the metadata-only check, `cafe_otel._privacy.processor.SpanSanitiser`) runs on
the worker, on every span of a batch before the exporter sees any of it: a span that has
ended is read-only, so checking it there guards what leaves exactly as checking it inside
`span.end()` would, and the calling thread pays only the enqueue. It fails closed: a span
it cannot check is dropped and counted (`redaction_failed`), never handed on.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable

from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter

from cafe_otel._export.account import (
    ALREADY_SHUTDOWN,
    PROCESSED,
    QUEUE_FULL,
    REDACTION_FAILED,
    SHUTDOWN_TIMEOUT,
    TelemetryAccount,
)
from cafe_otel._export.attempts import AttemptLog
from cafe_otel._export.failsoft import GRACE_SECONDS, ExportBoundary
from cafe_otel._export.processor_metrics import processor_metrics
from cafe_otel._export.settle import Pending, Settler

QUEUE_FULL_WHY = "span queue full: spans dropped before export"
AFTER_SHUTDOWN_WHY = "span ended after telemetry shutdown; dropped"


class BoundedBatchSpanProcessor(SpanProcessor):
    """Batches sampled spans to `exporter` on one worker, and settles every one of them in
    `account` exactly once: exported, dropped with a cause, or unconfirmed. No call ever
    blocks the calling thread, and `force_flush` and `shutdown` end within their bounds
    whatever the exporter does (the module's text says why this is not the SDK's)."""

    def __init__(
        self,
        exporter: SpanExporter,
        *,
        account: TelemetryAccount | None = None,
        max_queue_size: int = 2048,
        max_export_batch_size: int = 512,
        schedule_delay: float = 1.0,
        shutdown_timeout: float = 5.0,
        export_timeout: float = 5.0,
        export_grace: float = GRACE_SECONDS,
        target: str | None = None,
        meter_provider: MeterProvider | None = None,
        rejected: Callable[[], int] | None = None,
        refused: Callable[[], int | None] | None = None,
        prepare: Callable[[ReadableSpan], ReadableSpan] | None = None,
        attempts: AttemptLog | None = None,
    ) -> None:
        """An export that has not answered within `export_timeout` + `export_grace` seconds
        has its batch counted as lost and the worker moves on (the grace lets an OTLP
        exporter given the same timeout finish its last try). `target` names where spans go
        in error texts (e.g. "grpc http://host:4317"; default: the exporter's class). With a
        `meter_provider`, the processor also reports the SDK's `otel.sdk.processor.span.*`
        metrics (see `cafe_otel._export.processor_metrics`). `rejected`, when given, says after an
        export the exporter called a success how many of its spans the receiver rejected
        (OTLP's partial success, `cafe_otel._export.partial_success`): those are counted as lost.
        `refused`, when given, says after such an export the status of an answer that was not
        2xx (a redirect the exporter called a success): then the whole batch is lost.
        `prepare`, when given, turns each span into what may be exported, on the worker
        (see the module's text).
        `attempts`, when given, counts the exporter's attempts at the transport: at shutdown's
        bound it tells an export that may yet be stored (unconfirmed) from one that is only
        waiting to retry after attempts that delivered nothing (lost)."""
        if max_queue_size < 1 or max_export_batch_size < 1:
            raise ValueError("queue and batch sizes must be positive")
        # A zero delay would spin the worker; NaN or inf would kill it in Condition.wait.
        if not 0 < schedule_delay <= threading.TIMEOUT_MAX:
            raise ValueError(f"schedule_delay must be a positive, finite number of seconds, not {schedule_delay!r}")
        if not 0 <= shutdown_timeout <= threading.TIMEOUT_MAX:
            raise ValueError(f"shutdown_timeout must be a finite number of seconds, not {shutdown_timeout!r}")
        self._exporter = exporter
        self._prepare = prepare
        # A `prepare` that checks a whole batch at once (`SpanSanitiser.each`) is asked so.
        self._prepare_each: Callable[[list[ReadableSpan]], list[ReadableSpan | Exception]] | None = getattr(
            prepare, "each", None)
        self._attempts = attempts
        self.account = account if account is not None else TelemetryAccount()
        self._max_queue = max_queue_size
        self._batch = max_export_batch_size
        self._delay = schedule_delay
        self._shutdown_timeout = shutdown_timeout
        self._target = target or type(exporter).__name__
        self._export_timeout = export_timeout
        self._boundary = ExportBoundary(export_timeout, grace=export_grace, attempts=attempts)
        self._settler = Settler("traces", self.account, self._target, rejected=rejected, refused=refused,
                                attempts=attempts)
        self._queue: collections.deque[ReadableSpan] = collections.deque()
        self._cond = threading.Condition()
        self._flush_requests: list[threading.Event] = []
        self._stopping = False
        self._worker: threading.Thread | None = None
        self._in_flight: Pending | None = None
        self._metrics = processor_metrics(meter_provider, capacity=max_queue_size, queue_size=lambda: len(self._queue))

    def _ensure_worker(self) -> None:
        # Started on first use, not in __init__: building a processor has no side effects.
        if self._worker is None:
            self._worker = threading.Thread(target=self._work, name="cafe-otel-batch", daemon=True)
            self._worker.start()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None or not context.trace_flags.sampled:
            return  # as the SDK's processors: an unsampled span is not ours to export
        with self._cond:
            if self._stopping:
                self._lost_before_export(1, ALREADY_SHUTDOWN, AFTER_SHUTDOWN_WHY)
                return
            if len(self._queue) >= self._max_queue:
                self._lost_before_export(1, QUEUE_FULL, QUEUE_FULL_WHY)
                return
            self._queue.append(span)
            self._ensure_worker()
            if len(self._queue) >= self._batch:
                self._cond.notify_all()

    def _work(self) -> None:
        while True:
            with self._cond:
                if not (self._stopping or self._flush_requests or len(self._queue) >= self._batch):
                    self._cond.wait(self._delay)
                spans = [self._queue.popleft() for _ in range(min(self._batch, len(self._queue)))]
                batch = self._settler.pending(len(spans)) if spans else None
                self._in_flight = batch
                stop = self._stopping and not self._queue
            if batch is not None:
                if self._prepare is not None:
                    spans = self._prepared(batch, spans, self._prepare)
                if spans:
                    self._metrics.submitted(len(spans))
                    self._settler.forget_stale()
                    self._settler.settle(batch, self._boundary.export(self._exporter.export, spans),
                                         waited=self._export_timeout)
                else:
                    batch.settle()  # nothing left to export; each loss is counted
            with self._cond:
                self._in_flight = None
                flushes = [] if self._queue else self._flush_requests[:]
                if not self._queue:
                    self._flush_requests.clear()
            for event in flushes:
                event.set()
            if stop and batch is None:
                return

    def _lost_before_export(self, count: int, cause: str, why: str) -> None:
        """Spans that never reached the exporter: in the account and the processor's metrics."""
        self.account.add("traces", PROCESSED, count, cause, why)
        self._metrics.dropped(count, cause)

    def _prepared(self, batch: Pending, spans: list[ReadableSpan],
                  prepare: Callable[[ReadableSpan], ReadableSpan]) -> list[ReadableSpan]:
        """The batch's spans as `prepare` made them; a span it raised on is dropped and counted."""
        clean: list[ReadableSpan] = []
        failures: list[str] = []
        if self._prepare_each is not None:
            try:
                found = self._prepare_each(spans)
                if len(found) != len(spans):
                    raise ValueError("the check answered for another number of spans")
            except Exception as error:  # fail closed: the whole batch unchecked, none handed on
                found = [error] * len(spans)
            for item in found:
                if isinstance(item, Exception):
                    failures.append(type(item).__name__)
                else:
                    clean.append(item)
        else:
            for span in spans:
                try:
                    clean.append(prepare(span))
                except Exception as error:  # fail closed: never hand on the unchecked span
                    failures.append(type(error).__name__)
        if failures and batch.shrink(len(failures)):
            for error_type in failures:
                self._lost_before_export(1, REDACTION_FAILED, f"sanitising a span raised {error_type}; span dropped")
        elif failures:
            return []  # shutdown already counted the whole batch
        return clean

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        bound = max(timeout_millis / 1000, 0.0)
        deadline = time.monotonic() + bound
        done = threading.Event()
        with self._cond:
            pending = bool(self._queue) or self._in_flight is not None
            if pending:
                self._ensure_worker()
                self._flush_requests.append(done)
                self._cond.notify_all()
        if pending and not done.wait(min(bound, threading.TIMEOUT_MAX)):
            return False
        left = max(deadline - time.monotonic(), 0.0)
        outcome = self._boundary.control(self._exporter.force_flush, int(left * 1000), timeout=left)
        if not outcome.ok:
            self.account.note_error(f"force_flush of {self._target}: {outcome.why}")
        return outcome.ok and outcome.value is not False

    def shutdown(self, timeout: float | None = None) -> None:
        """Export what is queued within `timeout` seconds; count what is left as lost."""
        bound = self._shutdown_timeout if timeout is None else timeout
        bound = min(bound, threading.TIMEOUT_MAX) if bound >= 0 else 0.0  # NaN too: no wait
        deadline = time.monotonic() + bound
        with self._cond:
            if self._stopping:
                return
            self._stopping = True
            worker = self._worker
            self._cond.notify_all()
        if worker is not None:
            worker.join(max(deadline - time.monotonic(), 0.0))
        with self._cond:
            left = len(self._queue)
            self._queue.clear()
            in_flight = self._in_flight
        why = f"shutdown's {bound:g}s bound ran out"
        if left:
            self._lost_before_export(left, SHUTDOWN_TIMEOUT, f"{left} spans still queued when {why}")
        if in_flight is not None:
            self._settler.settle_in_flight(in_flight, why)
        # No export after this (one still in flight ends on its own), and the export
        # runner's thread ends once it is idle.
        self._boundary.close()
        # The exporter's own shutdown gets what is left of the bound; started even when none
        # is (an OTLP exporter's shutdown is what ends its retry sleep), never waited past it.
        outcome = self._boundary.control(self._exporter.shutdown, timeout=deadline - time.monotonic())
        if not outcome.ok:
            self.account.note_error(f"shutdown of {self._target}: {outcome.why}")
