"""`FailSoftSpanExporter`: the export boundary that never raises and never hangs.

The inner exporter runs on a worker thread and we stop waiting after `export_timeout`.
While one export is still hung, the next batch is dropped and counted rather than a
second thread being started (a dead collector must not pile up threads). Every span is
settled exactly once in the account: exported, or dropped with a reason. `shutdown`
settles an export still in flight as lost and bounds the inner shutdown too. A failure is
named as cafe's one fail-soft boundary names it (`cafe.trace.failsoft`): by class, never
by its message.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from cafe.trace.failsoft import report_failure
from cafe_otel.account import TelemetryAccount

GRACE_SECONDS = 0.25


class _Flight:
    """One export in progress; `settle` is first-wins so no span is counted twice."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.done = threading.Event()
        self.result: SpanExportResult | None = None
        self.error: BaseException | None = None
        self.finished = False  # the inner export returned or raised (done may be set by shutdown)
        self._settled = False
        self._lock = threading.Lock()

    def settle(self) -> bool:
        with self._lock:
            if self._settled:
                return False
            self._settled = True
            return True


class FailSoftSpanExporter(SpanExporter):
    def __init__(
        self,
        inner: SpanExporter,
        *,
        export_timeout: float = 5.0,
        account: TelemetryAccount | None = None,
        target: str | None = None,
    ) -> None:
        """`target` names where spans go in error texts (e.g. "grpc http://host:4317")."""
        if export_timeout <= 0:
            raise ValueError("export_timeout must be positive")
        self.inner = inner
        self.export_timeout = export_timeout
        self.account = account if account is not None else TelemetryAccount()
        self._target = target or type(inner).__name__
        self._lock = threading.Lock()
        self._flight: _Flight | None = None
        self._shutdown = threading.Event()

    def _fail(self, flight: _Flight, why: str) -> SpanExportResult:
        if flight.settle():
            self.account.add_export_failed(flight.count, f"export to {self._target}: {why}")
        return SpanExportResult.FAILURE

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        flight = _Flight(len(spans))
        if not spans:
            return SpanExportResult.SUCCESS
        if self._shutdown.is_set():
            return self._fail(flight, "exporter already shut down")
        with self._lock:
            busy = self._flight is not None and not self._flight.done.is_set()
            if not busy:
                self._flight = flight
        if busy:
            return self._fail(flight, "the previous export is still hung; batch dropped")
        worker = threading.Thread(target=self._run, args=(flight, list(spans)),
                                  name="cafe-otel-export", daemon=True)
        worker.start()
        # The inner exporter is given the same timeout and its clock starts a little later:
        # without the grace, an export it completes in its last moments would be counted
        # as lost although the collector took it.
        flight.done.wait(self.export_timeout + GRACE_SECONDS)
        if not flight.finished:  # timed out, or woken by shutdown
            return self._fail(flight, f"no answer within {self.export_timeout:g}s")
        if flight.error is not None:
            return self._fail(flight, f"exporter raised {report_failure(flight.error).error_class}")
        if flight.result is not SpanExportResult.SUCCESS:
            return self._fail(flight, "exporter returned FAILURE")
        if flight.settle():
            self.account.add_exported(flight.count)
        return SpanExportResult.SUCCESS

    def _run(self, flight: _Flight, spans: list[ReadableSpan]) -> None:
        try:
            flight.result = self.inner.export(spans)
        except BaseException as error:  # the boundary: whatever the inner exporter does
            flight.error = error
        finally:
            flight.finished = True
            flight.done.set()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._bounded("force_flush", lambda: self.inner.force_flush(timeout_millis),
                             min(timeout_millis / 1000, self.export_timeout))

    def shutdown(self, timeout: float | None = None) -> None:
        """Settle any hung export as lost, then shut the inner exporter down within
        `timeout` seconds (default: `export_timeout`)."""
        if self._shutdown.is_set():
            return
        self._shutdown.set()
        with self._lock:
            flight = self._flight
        if flight is not None and not flight.done.is_set():
            self._fail(flight, "export still in flight at shutdown")
            flight.done.set()  # wake the waiting export() now, not after its bound
        bound = self.export_timeout if timeout is None else max(timeout, 0.0)
        self._bounded("shutdown", self.inner.shutdown, bound)

    def _bounded(self, what: str, call, bound: float) -> bool:
        outcome: list[object] = []

        def run() -> None:
            try:
                outcome.append(call())
            except BaseException as error:
                outcome.append(error)

        worker = threading.Thread(target=run, name=f"cafe-otel-{what}", daemon=True)
        worker.start()
        worker.join(bound)
        if worker.is_alive():
            self.account.note_error(f"{what} of {self._target}: no answer within {bound:g}s")
            return False
        if outcome and isinstance(outcome[0], BaseException):
            self.account.note_error(f"{what} of {self._target} raised {report_failure(outcome[0]).error_class}")
            return False
        return outcome[0] is not False if outcome else True
