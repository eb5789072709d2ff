"""cafe's one fail-soft boundary (`cafe.trace.failsoft.FailSoft`: a call that never raises,
never hangs, and says what happened, naming a failure by its class only) around an
exporter's three calls: export, force_flush and shutdown.

`ExportBoundary` is that boundary for one exporter, and every exporter call of ours goes
through one: the batch processor's (`cafe_otel._export.batch`), the metrics exporter's
(`cafe_otel._export.metrics_export.FailSoftMetricExporter`) and `FailSoftSpanExporter`'s,
which puts it behind the SDK's `SpanExporter` interface for the SDK's own processors
(`export` returns FAILURE for whatever went wrong, `shutdown()` with no argument is bounded
too, and it counts nothing: counting belongs to whoever sees every span).

An export runs on `ExportRunner`, one long-lived thread that takes one export at a time,
rather than on a thread started for it: starting a thread costs the exporting process more
than checking and exporting a small batch, and an export that is hung keeps the runner, so
the next one is `busy` at once, as `FailSoft(exclusive=True)` answers.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from cafe.trace import ALREADY_SHUTDOWN, BUSY, TIMEOUT, FailSoft, Outcome, report_failure
from cafe_otel._export.attempts import AttemptLog
from cafe_otel._export.settle import export_succeeded
from cafe_otel._forks import ChildHook

# The inner OTLP exporter is given the same timeout and starts its clock a little later:
# without this grace, an export it completes in its last moments would be counted as lost
# although the collector took it.
GRACE_SECONDS = 0.25
# A runner with nothing to do for this long ends its thread; the next export starts another.
RUNNER_IDLE_SECONDS = 30.0
# At most this long is added to a call's bound while its runner waits to be scheduled: the
# bound is the callee's time, as a thread started for the call is waited for to start.
SCHEDULING_ALLOWANCE = 0.1

_RUNNERS: weakref.WeakSet[ExportRunner] = weakref.WeakSet()


class ExportRunner:
    """Calls bounded in time, one at a time, on one daemon thread that stays for the next
    call (`FailSoft(exclusive=True)`'s answers, without a thread started a call): while a
    call is in flight, hung or not, the next returns `busy` at once; a call not answered
    within its bound (counted from when the thread takes it, see `SCHEDULING_ALLOWANCE`)
    returns `timeout` and keeps the thread until it ends. The thread ends
    after `idle` seconds without a call, or once `stop()` is called and its call (if any)
    has ended; a later call starts another, unless the runner is stopped."""

    def __init__(self, name: str = "cafe-otel-export", *, idle: float = RUNNER_IDLE_SECONDS) -> None:
        self._name = name
        self._idle = idle
        self._stopped = False
        self._reset()
        _FORKS.watch()
        _RUNNERS.add(self)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Lock()  # released when a call is handed over, or to stop
        self._wake.acquire()
        self._thread: threading.Thread | None = None
        self._job: tuple[Callable[..., Any], tuple[Any, ...], list[Outcome], threading.Lock, list[float]] | None = None
        self._running = False

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float) -> Outcome:
        """`fn(*args)` within `timeout` seconds; never raises."""
        bound = min(timeout, threading.TIMEOUT_MAX) if timeout >= 0 else 0.0  # NaN too: no wait
        done = threading.Lock()
        done.acquire()
        box: list[Outcome] = []
        picked: list[float] = []  # when the runner took the call
        with self._lock:
            if self._running:
                return Outcome(error_type=BUSY, why="the previous call is still hung; not attempted")
            if self._stopped:
                return Outcome(error_type=ALREADY_SHUTDOWN, why="exporter already shut down")
            self._running = True
            self._job = (fn, args, box, done, picked)
            if self._thread is None:
                thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
                try:
                    thread.start()
                except RuntimeError as error:  # no thread can be started (interpreter exiting)
                    self._running, self._job = False, None
                    return Outcome(error_type=report_failure(error).error_class, why="could not be called (no thread)")
                self._thread = thread
            self._wake.release()
            handed = time.monotonic()
        if not done.acquire(timeout=bound):
            late = picked[0] - handed if picked else SCHEDULING_ALLOWANCE
            if late > 0:
                done.acquire(timeout=min(late, SCHEDULING_ALLOWANCE))
        if not box:
            return Outcome(error_type=TIMEOUT, why=f"no answer within {bound:g}s")
        return box[0]

    def stop(self) -> None:
        """No call is taken from now on; the thread ends now when idle, else once its call
        ends. Never waits."""
        with self._lock:
            self._stopped = True
            if self._thread is not None and not self._running:
                self._wake.release()  # idle: nothing handed over, so the thread wakes to end

    def _serve(self) -> None:
        me = threading.current_thread()
        try:
            while True:
                woken = self._wake.acquire(timeout=self._idle)
                with self._lock:
                    job, self._job = self._job, None
                    if not woken:  # a hand-over (or a stop) as the wait ran out: take it too
                        self._wake.acquire(blocking=False)
                    if job is None:  # idle, or stopped: the next call starts a thread again
                        self._thread = None
                        return
                fn, args, box, done, picked = job
                picked.append(time.monotonic())
                try:
                    box.append(Outcome(value=fn(*args)))
                except BaseException as error:  # on a worker thread even SystemExit is the callee's
                    box.append(Outcome(error_type=report_failure(error).error_class,
                                       why=f"raised {type(error).__name__}"))
                finally:
                    with self._lock:
                        self._running = False
                        if self._stopped:
                            self._thread = None
                    done.release()
                if self._thread is not me:
                    return
        finally:
            with self._lock:  # however it ended, the next call finds no thread and starts one
                if self._thread is me:
                    self._thread = None


def _after_fork_in_child() -> None:
    # A child has none of its parent's threads: its runners start afresh, with no call in flight.
    for runner in list(_RUNNERS):
        runner._reset()


_FORKS = ChildHook(_after_fork_in_child)  # registered by the first runner, not on import


class ExportBoundary:
    """One exporter's calls, each bounded and never raising. At most one export is in
    flight (while one is hung the next is `busy` at once, so a dead collector piles up no
    threads); flushes and shutdowns are bounded by `export_timeout` unless told otherwise,
    and none is attempted after `close()`."""

    def __init__(self, export_timeout: float, *, grace: float = GRACE_SECONDS,
                 attempts: AttemptLog | None = None, name: str = "cafe-otel") -> None:
        if not 0 < export_timeout < float("inf"):
            raise ValueError("export_timeout must be a positive, finite number of seconds")
        self.export_timeout = export_timeout
        self._export_bound = export_timeout + grace
        self._exports = ExportRunner(f"{name}-export")
        self._control = FailSoft(export_timeout, exclusive=False, name=f"{name}-control")
        self._attempts = attempts
        self._closed = threading.Event()

    def export(self, export: Callable[..., Any], *args: Any, timeout: float | None = None) -> Outcome:
        """`export(*args)` within `timeout` seconds (default: the export timeout and its grace)."""
        if self._closed.is_set():
            return Outcome(error_type=ALREADY_SHUTDOWN, why="exporter already shut down")
        return self._exports.call(self._attempted, export, args,
                                  timeout=self._export_bound if timeout is None else timeout)

    def _attempted(self, export: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        # On the thread that runs the export, so an export not attempted (busy) counts none.
        if self._attempts is not None:
            self._attempts.start_export()
        return export(*args)

    def control(self, call: Callable[..., Any], *args: Any, timeout: float | None = None) -> Outcome:
        """A flush or shutdown call within `timeout` seconds (default: the export timeout)."""
        return self._control.call(call, *args, timeout=timeout)

    def close(self) -> bool:
        """No export is attempted from now on; False when it was already closed."""
        if self._closed.is_set():
            return False
        self._closed.set()
        self._exports.stop()  # its thread ends now, or once a hung export returns
        return True


class FailSoftSpanExporter(SpanExporter):
    """A `SpanExporter` that never raises and never hangs, wrapping any other."""

    def __init__(
        self,
        inner: SpanExporter,
        *,
        export_timeout: float = 5.0,
        grace: float = GRACE_SECONDS,
    ) -> None:
        self.inner = inner
        self.export_timeout = export_timeout
        self._boundary = ExportBoundary(export_timeout, grace=grace)
        self.last_outcome: Outcome | None = None

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not spans:
            return SpanExportResult.SUCCESS
        outcome = self._boundary.export(self.inner.export, list(spans))
        self.last_outcome = outcome
        return SpanExportResult.SUCCESS if export_succeeded("traces", outcome) else SpanExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        outcome = self._boundary.control(self.inner.force_flush, timeout_millis,
                                         timeout=min(timeout_millis / 1000, self.export_timeout))
        return outcome.ok and outcome.value is not False

    def shutdown(self, timeout: float | None = None) -> None:
        """Shut the inner exporter down within `timeout` seconds (default: `export_timeout`)."""
        if self._boundary.close():
            self._boundary.control(self.inner.shutdown, timeout=timeout)
