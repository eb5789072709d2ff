"""`FailSoftSpanExporter`: cafe's one fail-soft boundary (`cafe.trace.failsoft.FailSoft`: a
call that never raises, never hangs, and says what happened, naming a failure by its class
only) behind the SDK's `SpanExporter` interface.

`FailSoftSpanExporter` is that boundary behind the SDK's `SpanExporter` interface, for the
SDK's own processors: `export` returns FAILURE for whatever went wrong, and `shutdown()`
with no argument is bounded too. It counts nothing: counting belongs to the processor,
which sees every span (`BoundedBatchSpanProcessor` puts every exporter call through a
`FailSoft` itself, so it needs no wrapper).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from cafe.trace.failsoft import ALREADY_SHUTDOWN, FailSoft, Outcome

# The inner OTLP exporter is given the same timeout and starts its clock a little later:
# without this grace, an export it completes in its last moments would be counted as lost
# although the collector took it.
GRACE_SECONDS = 0.25

class FailSoftSpanExporter(SpanExporter):
    """A `SpanExporter` that never raises and never hangs, wrapping any other."""

    def __init__(
        self,
        inner: SpanExporter,
        *,
        export_timeout: float = 5.0,
        grace: float = GRACE_SECONDS,
    ) -> None:
        if not 0 < export_timeout < float("inf"):
            raise ValueError("export_timeout must be a positive, finite number of seconds")
        self.inner = inner
        self.export_timeout = export_timeout
        self._exports = FailSoft(export_timeout + grace, name="cafe-otel-export")
        self._control = FailSoft(export_timeout, exclusive=False, name="cafe-otel-control")
        self._shutdown = threading.Event()
        self.last_outcome: Outcome | None = None

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not spans:
            return SpanExportResult.SUCCESS
        if self._shutdown.is_set():
            outcome = Outcome(error_type=ALREADY_SHUTDOWN, why="exporter already shut down")
        else:
            outcome = self._exports.call(self.inner.export, list(spans))
        self.last_outcome = outcome
        return SpanExportResult.SUCCESS if export_succeeded(outcome) else SpanExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        outcome = self._control.call(self.inner.force_flush, timeout_millis,
                                     timeout=min(timeout_millis / 1000, self.export_timeout))
        return outcome.ok and outcome.value is not False

    def shutdown(self, timeout: float | None = None) -> None:
        """Shut the inner exporter down within `timeout` seconds (default: `export_timeout`)."""
        if self._shutdown.is_set():
            return
        self._shutdown.set()
        self._control.call(self.inner.shutdown, timeout=timeout)


def export_succeeded(outcome: Outcome) -> bool:
    """An export counts as delivered only when the exporter returned SUCCESS itself."""
    return outcome.ok and outcome.value is SpanExportResult.SUCCESS
