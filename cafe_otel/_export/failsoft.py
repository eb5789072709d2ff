"""cafe's one fail-soft boundary (`cafe.trace.failsoft.FailSoft`: a call that never raises,
never hangs, and says what happened, naming a failure by its class only) around an
exporter's three calls: export, force_flush and shutdown.

`ExportBoundary` is that boundary for one exporter, and every exporter call of ours goes
through one: the batch processor's (`cafe_otel._export.batch`), the metrics exporter's
(`cafe_otel._export.metrics_export.FailSoftMetricExporter`) and `FailSoftSpanExporter`'s,
which puts it behind the SDK's `SpanExporter` interface for the SDK's own processors
(`export` returns FAILURE for whatever went wrong, `shutdown()` with no argument is bounded
too, and it counts nothing: counting belongs to whoever sees every span).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from cafe.trace import ALREADY_SHUTDOWN, FailSoft, Outcome
from cafe_otel._export.attempts import AttemptLog
from cafe_otel._export.settle import export_succeeded

# The inner OTLP exporter is given the same timeout and starts its clock a little later:
# without this grace, an export it completes in its last moments would be counted as lost
# although the collector took it.
GRACE_SECONDS = 0.25


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
        self._exports = FailSoft(export_timeout + grace, name=f"{name}-export")
        self._control = FailSoft(export_timeout, exclusive=False, name=f"{name}-control")
        self._attempts = attempts
        self._closed = threading.Event()

    def export(self, export: Callable[..., Any], *args: Any, timeout: float | None = None) -> Outcome:
        """`export(*args)` within `timeout` seconds (default: the export timeout and its grace)."""
        if self._closed.is_set():
            return Outcome(error_type=ALREADY_SHUTDOWN, why="exporter already shut down")
        return self._exports.call(self._attempted, export, args, timeout=timeout)

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
