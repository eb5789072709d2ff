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
`cafe_otel._export.account`), whatever the exporter does.

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
from dataclasses import dataclass, field

from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from cafe.trace.failsoft import BUSY, TIMEOUT, FailSoft, Outcome
from cafe_otel._export.account import (
    ALREADY_SHUTDOWN,
    QUEUE_FULL,
    REDACTION_FAILED,
    REJECTED,
    SHUTDOWN_TIMEOUT,
    TelemetryAccount,
)
from cafe_otel._export.attempts import AttemptLog, InFlight
from cafe_otel._export.failsoft import GRACE_SECONDS, export_succeeded
from cafe_otel._export.partial_success import refusal_status, rejected_count
from cafe_otel._export.processor_metrics import processor_metrics


@dataclass
class _Batch:
    """A batch handed to the exporter; settled once, by its outcome or by shutdown."""

    count: int
    _settled: bool = field(default=False)

    def settle(self, lock: threading.Lock) -> bool:
        with lock:
            if self._settled:
                return False
            self._settled = True
            return True

    def shrink(self, lost: int, lock: threading.Lock) -> bool:
        """Take `lost` spans out of the batch (they are counted elsewhere), unless shutdown
        has already counted the whole batch."""
        with lock:
            if self._settled:
                return False
            self.count -= lost
            return True


class BoundedBatchSpanProcessor(SpanProcessor):
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
        self._rejected = rejected
        self._refused = refused
        self._prepare = prepare
        self._attempts = attempts
        self.account = account if account is not None else TelemetryAccount()
        self._max_queue = max_queue_size
        self._batch = max_export_batch_size
        self._delay = schedule_delay
        self._shutdown_timeout = shutdown_timeout
        self._target = target or type(exporter).__name__
        self._export_timeout = export_timeout
        self._exports = FailSoft(export_timeout + export_grace, name="cafe-otel-export")
        self._control = FailSoft(export_timeout, exclusive=False, name="cafe-otel-control")
        self._queue: collections.deque[ReadableSpan] = collections.deque()
        self._cond = threading.Condition()
        self._settle_lock = threading.Lock()
        self._flush_requests: list[threading.Event] = []
        self._stopping = False
        self._worker: threading.Thread | None = None
        self._in_flight: _Batch | None = None
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
                self.account.add_after_shutdown(1)
                self._metrics.dropped(1, ALREADY_SHUTDOWN)
                return
            if len(self._queue) >= self._max_queue:
                self.account.add_queue_full(1)
                self._metrics.dropped(1, QUEUE_FULL)
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
                batch = _Batch(len(spans)) if spans else None
                self._in_flight = batch
                stop = self._stopping and not self._queue
            if batch is not None:
                if self._prepare is not None:
                    spans = self._prepared(batch, spans, self._prepare)
                if spans:
                    self._metrics.submitted(len(spans))
                # What an earlier export's late answer reported belongs to no batch now.
                self._rejected_count(0)
                self._refusal()
                if spans:
                    self._settle(batch, self._exports.call(self._export, spans))
                else:
                    batch.settle(self._settle_lock)  # nothing left to export; each loss is counted
            with self._cond:
                self._in_flight = None
                flushes = [] if self._queue else self._flush_requests[:]
                if not self._queue:
                    self._flush_requests.clear()
            for event in flushes:
                event.set()
            if stop and batch is None:
                return

    def _prepared(self, batch: _Batch, spans: list[ReadableSpan],
                  prepare: Callable[[ReadableSpan], ReadableSpan]) -> list[ReadableSpan]:
        """The batch's spans as `prepare` made them; a span it raised on is dropped and counted."""
        clean: list[ReadableSpan] = []
        failures: list[str] = []
        for span in spans:
            try:
                clean.append(prepare(span))
            except Exception as error:  # fail closed: never hand on the unchecked span
                failures.append(type(error).__name__)
        if failures and batch.shrink(len(failures), self._settle_lock):
            for error_type in failures:
                self.account.add_redaction_failed(f"sanitising a span raised {error_type}; span dropped")
            self._metrics.dropped(len(failures), REDACTION_FAILED)
        elif failures:
            return []  # shutdown already counted the whole batch
        return clean

    def _export(self, spans: list[ReadableSpan]) -> object:
        # On the thread that runs the export, so an export not attempted (busy) counts none.
        if self._attempts is not None:
            self._attempts.start_export()
        return self._exporter.export(spans)

    def _settle(self, batch: _Batch, outcome: Outcome) -> None:
        if not batch.settle(self._settle_lock):
            return  # shutdown already counted it
        self._count(batch, outcome)

    def _count(self, batch: _Batch, outcome: Outcome) -> None:
        refusal = self._refusal() if export_succeeded(outcome) else None
        if refusal is not None:
            self.account.add_export_failed(
                batch.count, f"export to {self._target}: the receiver answered {refusal}, not 2xx; "
                             "nothing was delivered", str(refusal))
        elif export_succeeded(outcome):
            rejected = self._rejected_count(batch.count)
            self.account.add_exported(batch.count - rejected)
            if rejected:
                self.account.add_export_failed(
                    rejected, f"export to {self._target}: the receiver took the request but rejected "
                              f"{rejected} of its {batch.count} spans (OTLP partial success)", REJECTED)
        elif outcome.ok:  # returned, but not SUCCESS
            self.account.add_export_failed(batch.count, f"export to {self._target}: exporter returned FAILURE")
        else:
            self.account.add_export_failed(batch.count, f"export to {self._target}: {self._why(outcome)}",
                                           outcome.error_type or "")

    def _rejected_count(self, sent: int) -> int:
        return rejected_count(self._rejected, sent, self.account.note_error, f"export to {self._target}")

    def _refusal(self) -> int | None:
        return refusal_status(self._refused, self.account.note_error, f"export to {self._target}")

    def _why(self, outcome: Outcome) -> str:
        if outcome.error_type == TIMEOUT:
            return f"no answer within {self._export_timeout:g}s"
        if outcome.error_type == BUSY:
            return "the previous export is still hung; batch dropped"
        return f"exporter {outcome.why}"

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
        outcome = self._control.call(self._exporter.force_flush, int(left * 1000), timeout=left)
        if not outcome.ok:
            self.account.note_error(f"force_flush of {self._target}: {outcome.why}")
        return outcome.ok and outcome.value is not False

    def _settle_in_flight(self, batch: _Batch, why: str) -> None:
        """An export that has not returned by shutdown's bound: what its attempts say."""
        if self._attempts is None or not self._attempts.attached:  # nothing seen: no answer is not a loss
            self.account.add_unconfirmed(batch.count, f"an export to {self._target} was still in flight when {why}")
            return
        attempts = self._attempts.withdraw()  # no attempt of it leaves after this verdict
        verdict = attempts.in_flight()
        if verdict is InFlight.DELIVERED:
            # Answered 2xx (or gRPC OK) and the exporter not yet returned: its verdict is SUCCESS.
            self._count(batch, Outcome(value=SpanExportResult.SUCCESS))
        elif verdict is InFlight.DROPPED and attempts.last is not None:
            self.account.add_export_failed(
                batch.count, f"export to {self._target}: not delivered before exit; every attempt failed "
                             f"before reaching a receiver (last: {attempts.last.kind}) and the exporter was "
                             f"waiting to retry when {why}", attempts.last.kind)
        elif verdict is InFlight.UNSENT:  # handed to the exporter, never to the transport
            self.account.add_export_failed(
                batch.count, f"export to {self._target}: not sent before exit; no attempt had started when {why}",
                SHUTDOWN_TIMEOUT)
        else:  # the receiver may still store every span of it
            self.account.add_unconfirmed(batch.count, f"an export to {self._target} was still in flight when "
                                                      f"{why}: {attempts.why_unconfirmed()}")

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
            self.account.add_unflushed(left, f"{left} spans still queued when {why}")
            self._metrics.dropped(left, SHUTDOWN_TIMEOUT)
        if in_flight is not None and in_flight.settle(self._settle_lock):
            self._settle_in_flight(in_flight, why)
        # The exporter's own shutdown gets what is left of the bound; started even when none
        # is (an OTLP exporter's shutdown is what ends its retry sleep), never waited past it.
        outcome = self._control.call(self._exporter.shutdown, timeout=deadline - time.monotonic())
        if not outcome.ok:
            self.account.note_error(f"shutdown of {self._target}: {outcome.why}")
