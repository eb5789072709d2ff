"""The fail-soft boundary: a call that never raises, never hangs, and says what happened.

`FailSoft.call(fn, ...)` runs `fn` on a worker thread and waits at most its timeout. The
answer is an `Outcome` (the value, or a short, low-cardinality cause), never an exception.
With `exclusive=True` at most one call is in flight: while one is hung, the next returns
`busy` at once instead of starting a second thread (a dead collector must not pile up
threads). The boundary knows nothing of OpenTelemetry, so any exporter (cafe's own
`export_fail_soft` included) can be put behind the same idea.

`FailSoftSpanExporter` is that boundary behind the SDK's `SpanExporter` interface, for the
SDK's own processors: `export` returns FAILURE for whatever went wrong, and `shutdown()`
with no argument is bounded too. It counts nothing: counting belongs to the processor,
which sees every span (`BoundedBatchSpanProcessor` puts every exporter call through a
`FailSoft` itself, so it needs no wrapper).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

# The inner OTLP exporter is given the same timeout and starts its clock a little later:
# without this grace, an export it completes in its last moments would be counted as lost
# although the collector took it.
GRACE_SECONDS = 0.25

# error.type values (low cardinality, as the SDK's self-observability metrics want them);
# an exception is named by its class, as the SDK's exporters do.
TIMEOUT = "timeout"
BUSY = "busy"
ALREADY_SHUTDOWN = "already_shutdown"


@dataclass(frozen=True)
class Outcome:
    """What a bounded call did: returned `value` (error_type None) or failed for `error_type`."""

    value: Any = None
    error_type: str | None = None
    why: str = ""  # a short text of our own: never the exception's message (it may echo content)

    @property
    def ok(self) -> bool:
        return self.error_type is None


class FailSoft:
    def __init__(self, timeout: float, *, exclusive: bool = True, name: str = "cafe-otel-call") -> None:
        if not 0 < timeout <= threading.TIMEOUT_MAX:
            raise ValueError("timeout must be a positive, finite number of seconds")
        self.timeout = timeout
        self._exclusive = exclusive
        self._name = name
        self._lock = threading.Lock()
        self._running: threading.Event | None = None  # set when the call in flight has ended

    def busy(self) -> bool:
        with self._lock:
            return self._running is not None and not self._running.is_set()

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float | None = None) -> Outcome:
        """`fn(*args)` within `timeout` seconds (default: the boundary's); never raises."""
        bound = self.timeout if timeout is None else timeout
        if not bound >= 0:  # negative or NaN: do not wait at all
            bound = 0.0
        bound = min(bound, threading.TIMEOUT_MAX)
        ended = threading.Event()
        with self._lock:
            if self._exclusive and self._running is not None and not self._running.is_set():
                return Outcome(error_type=BUSY, why="the previous call is still hung; not attempted")
            self._running = ended
        box: list[Outcome] = []

        def run() -> None:
            try:
                box.append(Outcome(value=fn(*args)))
            except BaseException as error:  # the boundary: whatever the callee does
                box.append(Outcome(error_type=type(error).__qualname__,
                                   why=f"raised {type(error).__name__}"))
            finally:
                ended.set()

        try:
            threading.Thread(target=run, name=self._name, daemon=True).start()
        except RuntimeError as error:  # no thread can be started (interpreter exiting)
            ended.set()
            return Outcome(error_type=type(error).__qualname__, why="could not be called (no thread)")
        ended.wait(bound)
        if not box:
            return Outcome(error_type=TIMEOUT, why=f"no answer within {bound:g}s")
        return box[0]


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
