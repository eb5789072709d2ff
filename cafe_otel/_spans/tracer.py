"""`OTelTracer`: a cafe `Tracer` with a `SpanListener` added, for callers that want one
object (`run_shift(..., tracer=OTelTracer(provider))`).

It is a constructor, nothing more: it overrides no method of `Tracer`. The mirroring is
the listener's (`cafe_otel._spans.listener`); the isolation is the tracer's: a listener
failure never reaches the shift, and is counted in the account when there is one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from opentelemetry import trace

from cafe.trace import Clock, Exporter, FailureReport, Tracer
from cafe_otel._export.account import TelemetryAccount
from cafe_otel._spans.content import CaptureMode, capture_mode
from cafe_otel._spans.listener import SpanListener
from cafe_otel._spans.scope import otel_tracer_of

__all__ = ["OTelTracer", "otel_tracer_of"]


def count_in(account: TelemetryAccount | None) -> Callable[[FailureReport], None] | None:
    """An `on_listener_error` hook that counts a listener's failure in `account`."""
    if account is None:
        return None

    def counted(report: FailureReport) -> None:
        account.add_listener_error(str(report))

    return counted


class OTelTracer(Tracer):
    def __init__(
        self,
        provider: trace.TracerProvider | trace.Tracer,
        *,
        clock: Clock | None = None,
        origin_unix_nano: int | None = None,
        capture_content: CaptureMode | str | bool | None = None,
        environ: Mapping[str, str] | None = None,
        account: TelemetryAccount | None = None,
        exporter: Exporter | None = None,
        keep_inputs: bool | None = None,
        tree: bool = True,
    ) -> None:
        """`origin_unix_nano` switches to a deterministic timeline: each OTel timestamp is
        the origin plus the cafe clock's reading (seconds) in ns. `keep_inputs` defaults to
        whether content is captured: with metadata-only export, copying every call's input
        messages would be work done for nothing. `tree=False` leaves out the in-memory tree
        (nothing to render, only spans)."""
        capture = capture_mode(capture_content, environ)
        self.span_listener = SpanListener(provider, capture=capture, origin_unix_nano=origin_unix_nano)
        super().__init__(exporter=exporter, clock=clock,
                         keep_inputs=capture.enabled if keep_inputs is None else keep_inputs,
                         listeners=[self.span_listener], tree=tree, on_listener_error=count_in(account))

    @property
    def capture(self) -> CaptureMode:
        return self.span_listener.capture
