"""`BoundedBatchSpanProcessor`: batching whose losses are counted and whose waits end.

Why our own rather than the SDK's `BatchSpanProcessor`: that one drops the oldest span
silently when its queue is full (no public counter to read), ignores the timeout of
`force_flush`, and its `shutdown()` can block for up to 30 s. Counting through its public
behaviour is not possible, so this small processor has a bounded, non-blocking queue
(a full queue drops the new span and counts it), one daemon worker thread, and
`force_flush`/`shutdown` that return within their bound and count what is left behind.
"""

from __future__ import annotations

import collections
import threading
import time

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter

from cafe_otel.account import TelemetryAccount
from cafe_otel.failsoft import FailSoftSpanExporter


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
    ) -> None:
        if max_queue_size < 1 or max_export_batch_size < 1:
            raise ValueError("queue and batch sizes must be positive")
        self._exporter = exporter
        self.account = account if account is not None else TelemetryAccount()
        self._max_queue = max_queue_size
        self._batch = max_export_batch_size
        self._delay = schedule_delay
        self._shutdown_timeout = shutdown_timeout
        self._queue: collections.deque[ReadableSpan] = collections.deque()
        self._cond = threading.Condition()
        self._flush_requests: list[threading.Event] = []
        self._stopping = False
        self._worker: threading.Thread | None = None
        self._busy = False  # the worker holds a batch that is being exported

    def _ensure_worker(self) -> None:
        # Started on first use, not in __init__: building a processor has no side effects.
        if self._worker is None:
            self._worker = threading.Thread(target=self._work, name="cafe-otel-batch", daemon=True)
            self._worker.start()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        with self._cond:
            if self._stopping:
                self.account.add_unflushed(1, "span ended after telemetry shutdown; dropped")
                return
            if len(self._queue) >= self._max_queue:
                self.account.add_queue_full(1)
                return
            self._queue.append(span)
            self._ensure_worker()
            if len(self._queue) >= self._batch:
                self._cond.notify_all()

    def _take(self) -> list[ReadableSpan]:
        batch = []
        while self._queue and len(batch) < self._batch:
            batch.append(self._queue.popleft())
        return batch

    def _work(self) -> None:
        while True:
            with self._cond:
                if not (self._stopping or self._flush_requests or len(self._queue) >= self._batch):
                    self._cond.wait(self._delay)
                batch = self._take()
                self._busy = bool(batch)
                stop = self._stopping and not self._queue
            if batch:
                self._exporter.export(batch)  # fail-soft: bounded, never raises
            with self._cond:
                self._busy = False
                flushes = [] if self._queue else self._flush_requests[:]
                if not self._queue:
                    self._flush_requests.clear()
            for event in flushes:
                event.set()
            if stop and not batch:
                return

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        done = threading.Event()
        with self._cond:
            if not self._queue and not self._busy:
                return True
            self._ensure_worker()
            self._flush_requests.append(done)
            self._cond.notify_all()
        return done.wait(timeout_millis / 1000)

    def shutdown(self, timeout: float | None = None) -> None:
        """Export what is queued within `timeout` seconds; count what is left as lost."""
        bound = self._shutdown_timeout if timeout is None else max(timeout, 0.0)
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
        if left:
            self.account.add_unflushed(left, f"{left} spans still queued when shutdown's {bound:g}s bound ran out")
        if isinstance(self._exporter, FailSoftSpanExporter):
            self._exporter.shutdown(timeout=max(deadline - time.monotonic(), 0.05))
        else:
            self._exporter.shutdown()
