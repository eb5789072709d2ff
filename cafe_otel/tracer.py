"""`OTelTracer`: cafe's `Tracer`, mirroring every span as an OpenTelemetry span live.

A drop-in: `run_shift(..., tracer=OTelTracer(provider))` needs no change to the harness.
Each cafe span opens its OTel span in `_span_started` (as a child of its parent's OTel
span) and the OTel context is attached there, so a third-party instrumented call made
inside a generation nests under the `chat` span; `_span_ended` sets the end attributes,
the status and ends it. Mirroring never raises into the shift: a failure is counted in
the account (or swallowed when there is none) and the shift goes on.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from cafe.trace.clock import Clock
from cafe.trace.span import GENERATION, SpanNode
from cafe.trace.tracer import Exporter, Tracer
from cafe_otel import mapping
from cafe_otel import semconv as sc
from cafe_otel.account import TelemetryAccount
from cafe_otel.content import CaptureMode, capture_mode


@functools.cache
def _our_version() -> str | None:
    # Read when first needed, not at import: importing this module does nothing.
    try:
        return version("cafe-otel")
    except PackageNotFoundError:  # an unpackaged checkout: the scope has no version
        return None


def otel_tracer_of(source: trace.TracerProvider | trace.Tracer) -> trace.Tracer:
    """Our instrumentation scope on a provider, with the pinned schema URL."""
    if isinstance(source, trace.Tracer):
        return source
    return source.get_tracer(sc.INSTRUMENTATION_NAME, _our_version(), schema_url=sc.SCHEMA_URL)


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
    ) -> None:
        """`origin_unix_nano` switches to a deterministic timeline: each OTel timestamp is
        the origin plus the cafe clock's reading (seconds) in ns. With a `TickClock` and a
        recording's `clock_origin_unix_nano` a replay always gets the same timestamps.
        Without it the OTel SDK stamps spans with the wall clock as usual.
        `keep_inputs` defaults to whether content is captured: with metadata-only export,
        copying every call's input messages would be work done for nothing."""
        capture = capture_mode(capture_content, environ)
        super().__init__(exporter=exporter, clock=clock,
                         keep_inputs=capture.enabled if keep_inputs is None else keep_inputs)
        self._otel = otel_tracer_of(provider)
        self._origin = origin_unix_nano
        self._capture = capture
        self._account = account
        self._spans: dict[int, Span] = {}
        self._tokens: dict[int, object] = {}

    @property
    def capture(self) -> CaptureMode:
        return self._capture

    def _ns(self, reading: float | None) -> int | None:
        if self._origin is None or reading is None:
            return None
        return self._origin + round(reading * 1_000_000_000)

    def _failed(self, where: str, error: BaseException) -> None:
        text = f"span mirror {where} failed ({type(error).__name__})"
        if self._account is not None:
            self._account.add_mirror_error(text)

    def _span_started(self, node: SpanNode) -> None:
        try:
            parent = self._spans.get(node.parent.span_id) if node.parent is not None else None
            parent_context = trace.set_span_in_context(parent) if parent is not None else None
            span = self._otel.start_span(
                mapping.span_name(node),
                context=parent_context,
                kind=mapping.span_kind(node),
                attributes=mapping.start_attributes(node),
                start_time=self._ns(node.start),
            )
            self._spans[node.span_id] = span
            # Current inside the cafe span: third-party instrumentation nests under it.
            self._tokens[node.span_id] = otel_context.attach(trace.set_span_in_context(span))
        except Exception as error:
            self._failed("start", error)

    def _span_ended(self, node: SpanNode) -> None:
        token = self._tokens.pop(node.span_id, None)
        span = self._spans.pop(node.span_id, None)
        try:
            if token is not None:
                otel_context.detach(token)  # type: ignore[arg-type]
            if span is None:
                return
            span.set_attributes(mapping.end_attributes(node))
            if self._capture.enabled:
                self._add_content(span, node)
            result = mapping.outcome(node)
            if result.code is StatusCode.ERROR:
                # No description: it would be free text; error.type says what failed.
                span.set_status(Status(StatusCode.ERROR))
            if node.exception is not None:
                self._record_exception(span, node.exception, self._ns(node.end))
            span.end(end_time=self._ns(node.end))
        except Exception as error:
            self._failed("end", error)

    def _record_exception(self, span: Span, error: BaseException, at_ns: int | None) -> None:
        # The event sits at the span's end: on a deterministic timeline it must not read
        # the wall clock either.
        if self._capture.enabled:
            span.record_exception(error, timestamp=at_ns)
        else:
            # The message and stack trace may quote customer text: the type only.
            span.add_event(sc.EXCEPTION_EVENT_NAME, {sc.EXCEPTION_TYPE: type(error).__name__},
                           timestamp=at_ns)

    def _add_content(self, span: Span, node: SpanNode) -> None:
        attributes = mapping.content_attributes(node)
        if not attributes:
            return
        if self._capture.on_span:
            span.set_attributes(attributes)
        if self._capture.on_event and node.kind == GENERATION:
            span.add_event(sc.CONTENT_EVENT_NAME, attributes, timestamp=self._ns(node.end))
