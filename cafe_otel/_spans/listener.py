"""`SpanListener`: one OpenTelemetry span per pair of cafe trace events, made directly.

No second tree: the listener keeps only the spans still open (with the shift's
conversation id and the turn they inherit), starts each as a child of its parent's OTel
span and attaches it as the current context, so that a third-party instrumented call made
inside it nests under it. Every attribute comes from `cafe_otel._spans.mapping`, the one mapping
shared by a live shift, a replay and `cafe export`.

One saving, where it changes nothing seen: a generation whose client reports no network
endpoint (a replay, a scripted or in-process model) is current as a `LazySpan`, and its
OTel span is made when it ends, in one `start_span` with its start time and all its
attributes, instead of being started, given its end attributes and ended. If anything
inside the call looks at the current span (an instrumented HTTP client starting a child),
the real span is made there and then, with the start it would have had. The exported span
is the same either way (a test compares them). A client reached over the network (it
reports `server_address`) always gets its span at the start.

Times: the SDK's wall clock by default; with `origin_unix_nano`, the origin plus the
event's clock reading (a `TickClock` replay gets the same timestamps every time); or an
explicit `timestamps` function (`cafe export` puts events on a recording's timeline).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from time import time_ns
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode

from cafe.trace import (
    GenerationEnded,
    GenerationStarted,
    PhaseEnded,
    PhaseStarted,
    ShiftEnded,
    ShiftStarted,
    SpanEnded,
    SpanStarted,
    ToolEnded,
    ToolStarted,
    TraceEvent,
)
from cafe_otel import semconv as sc
from cafe_otel._spans import mapping
from cafe_otel._spans.content import CaptureMode
from cafe_otel._spans.lazy_span import LazySpan
from cafe_otel._spans.scope import otel_tracer_of
from cafe_otel.agent import AGENT_TOTALS_KEY, MODEL_CALL_KEY, AgentTotals, qualified_name

Timestamps = Callable[[TraceEvent], int | None]


@dataclass(slots=True)
class _Open:
    span: Span  # a _Pending until the span is made
    token: Any  # the context token to detach at the end (None when not attached)
    conversation_id: str | None
    turn: int | None
    totals: AgentTotals | None = None  # the enclosing shift's, which its model calls add to


class _Pending(LazySpan):
    """A span made only at its end: what `start_span` will be given then, and, while the
    call runs, its current span (one object for both)."""

    def __init__(self, listener: SpanListener, record: _Open, name: str, kind: SpanKind,
                 attributes: dict[str, Any], context: otel_context.Context | None, start_ns: int) -> None:
        self.listener, self.record, self.name, self.kind = listener, record, name, kind
        self.attributes, self.context, self.start_ns = attributes, context, start_ns

    def _make(self) -> Span:
        return self.listener._made(self.record)


def _learned_span_key() -> str:
    """The context key the API keeps the current span under, asked of the API: a span's
    context is then one dictionary made with every value it holds, not one per value."""
    (key,) = trace.set_span_in_context(trace.INVALID_SPAN, otel_context.Context())
    return key


_SPAN_KEY = _learned_span_key()


class SpanListener:
    def __init__(
        self,
        provider: trace.TracerProvider | trace.Tracer,
        *,
        capture: CaptureMode = CaptureMode.NO_CONTENT,
        origin_unix_nano: int | None = None,
        timestamps: Timestamps | None = None,
        attach_context: bool = True,
        defer_local_generations: bool = True,
    ) -> None:
        self._otel = otel_tracer_of(provider)
        self._capture = capture
        # Read once: the mode's properties would be evaluated on every span's end otherwise.
        self._content, self._on_span = capture.enabled, capture.on_span
        self._origin = origin_unix_nano
        self._timestamps = timestamps
        self._clocked = timestamps is not None or origin_unix_nano is not None  # else the SDK's clock
        self._attach = attach_context
        self._defer = defer_local_generations
        self._open: dict[int, _Open] = {}
        self.spans_started = 0
        # Of each shift sampled (so sent), as 32 hex digits (what a backend's URL takes).
        self.trace_ids: list[str] = []
        self._handlers: dict[type, Callable[[Any], None]] = {
            ShiftStarted: self._shift_started, ShiftEnded: self._shift_ended,
            PhaseStarted: self._phase_started, PhaseEnded: self._phase_ended,
            GenerationStarted: self._generation_started, GenerationEnded: self._generation_ended,
            ToolStarted: self._tool_started, ToolEnded: self._tool_ended,
            SpanStarted: self._span_started, SpanEnded: self._span_ended,
        }

    @property
    def capture(self) -> CaptureMode:
        return self._capture

    def on_event(self, event: TraceEvent) -> None:
        handler = self._handlers.get(type(event))
        if handler is not None:  # consent decisions and tickets are for the metrics listener
            handler(event)

    def _ns(self, event: TraceEvent) -> int | None:
        if self._timestamps is not None:
            return self._timestamps(event)
        if self._origin is None:
            return None
        return self._origin + round(event.at * 1_000_000_000)

    # --- opening and closing ------------------------------------------------------------
    def _start(self, event: Any, name: str, kind: SpanKind, attributes: dict[str, Any],
               conversation_id: str | None, turn: int | None, *, at_end: bool = False,
               totals: AgentTotals | None = None) -> None:
        parent = self._open.get(event.parent_id) if event.parent_id is not None else None
        # A root follows the current context: a shift run inside a caller's span nests there.
        context = trace.set_span_in_context(self._made(parent)) if parent is not None else None
        if totals is None and parent is not None:
            totals = parent.totals
        self.spans_started += 1
        if at_end:
            current = otel_context.get_current()
            start_ns = self._ns(event) if self._clocked else None
            record = _Open(INVALID_SPAN, None, conversation_id, turn, totals)
            record.span = pending = _Pending(self, record, name, kind, attributes,
                                             context if context is not None else current,
                                             time_ns() if start_ns is None else start_ns)
            if self._attach:
                record.token = otel_context.attach(self._current(pending, kind, totals, current))
            self._open[event.span_id] = record
            return
        span = self._otel.start_span(name, context=context, kind=kind, attributes=attributes,
                                     start_time=self._ns(event) if self._clocked else None)
        token = otel_context.attach(self._current(span, kind, totals, otel_context.get_current())) \
            if self._attach else None
        self._open[event.span_id] = _Open(span, token, conversation_id, turn, totals)

    @staticmethod
    def _current(span: Span, kind: SpanKind, totals: AgentTotals | None,
                 current: otel_context.Context) -> otel_context.Context:
        """The context a span is current in (`current` with the span as its span): with the
        shift's totals, for anything that adds to them, and, for a model call (CLIENT), the
        mark that it has its chat span already (the wire instrumentor makes none of its own
        then)."""
        values = dict(current)
        values[_SPAN_KEY] = span
        if totals is not None:
            values[AGENT_TOTALS_KEY] = totals
        if kind is SpanKind.CLIENT:
            values[MODEL_CALL_KEY] = True
        return otel_context.Context(values)

    def _made(self, record: _Open, end_attributes: dict[str, Any] | None = None) -> Span:
        """The record's OTel span, made now if it was waiting (for its end, then with
        `end_attributes` too; or because something inside the call looked at it)."""
        pending = record.span
        if type(pending) is _Pending:  # not isinstance: an ABC's check is Python code
            attributes = pending.attributes
            if end_attributes:
                # As if started with the start attributes and then given these: a key set at
                # both moves to the end, as BoundedAttributes does on a second set.
                if not end_attributes.keys().isdisjoint(attributes):
                    attributes = {key: value for key, value in attributes.items() if key not in end_attributes}
                attributes.update(end_attributes)
            record.span = self._otel.start_span(pending.name, context=pending.context, kind=pending.kind,
                                                attributes=attributes, start_time=pending.start_ns)
        return record.span

    def _inherited(self, event: Any) -> tuple[str | None, int | None]:
        parent = self._open.get(event.parent_id) if event.parent_id is not None else None
        return (parent.conversation_id, parent.turn) if parent is not None else (None, None)

    def _end(self, event: Any, attributes: dict[str, Any], error_type: str | None,
             content: Callable[[Any], dict[str, Any]] | None = None) -> None:
        record = self._open.pop(event.span_id, None)
        if record is None:  # its start failed (counted then): nothing to end
            return
        if record.token is not None:
            otel_context.detach(record.token)
        end = self._ns(event) if self._clocked else None
        if type(record.span) is _Pending:
            span = self._made(record, attributes)
        else:
            span = record.span
            span.set_attributes(attributes)
        if content is not None and self._content:
            found = content(event)
            # Content goes on the span only. The 1.41.1 content event is a log record with
            # the content in structured form, which a span event (string attributes) is not:
            # none is emitted (`cafe_otel._spans.content.CaptureMode`).
            if found and self._on_span:
                span.set_attributes(found)
        if error_type:
            # No description: it would be free text; error.type says what failed.
            span.set_status(Status(StatusCode.ERROR))
        if event.error is not None:
            self._record_exception(span, event.error, end)
        span.end(end_time=end)

    def _record_exception(self, span: Span, error: BaseException, at_ns: int | None) -> None:
        # The event sits at the span's end: on a deterministic timeline it must not read
        # the wall clock either.
        if self._content:
            span.record_exception(error, timestamp=at_ns)
        else:
            # The message and stack trace may quote customer text: the type only, qualified.
            span.add_event(sc.EXCEPTION_EVENT_NAME, {sc.EXCEPTION_TYPE: qualified_name(type(error))},
                           timestamp=at_ns)

    # --- per event ----------------------------------------------------------------------
    def _shift_started(self, event: ShiftStarted) -> None:
        self._start(event, mapping.shift_name(event), SpanKind.INTERNAL, mapping.shift_start(event),
                    event.conversation_id, None, totals=AgentTotals())
        context = self._made(self._open[event.span_id]).get_span_context()
        if context.is_valid and context.trace_flags.sampled:  # a trace left out is on no backend
            self.trace_ids.append(f"{context.trace_id:032x}")

    def _shift_ended(self, event: ShiftEnded) -> None:
        record = self._open.get(event.span_id)
        attributes = mapping.shift_end(event)
        if record is not None and record.totals is not None:
            # The agent span sums up its model calls (and shows their content, when captured).
            attributes.update(record.totals.attributes())
            if self._on_span:
                attributes.update(record.totals.content())
        self._end(event, attributes, event.error_type)

    def _phase_started(self, event: PhaseStarted) -> None:
        conversation_id, turn = self._inherited(event)
        self._start(event, event.name, SpanKind.INTERNAL, mapping.phase_start(event),
                    conversation_id, event.turn if event.turn is not None else turn)

    def _phase_ended(self, event: PhaseEnded) -> None:
        self._end(event, mapping.phase_end(event), event.error_type)

    def _generation_started(self, event: GenerationStarted) -> None:
        conversation_id, turn = self._inherited(event)
        # The model is reached over the network (or stands in for something that is): CLIENT.
        self._start(event, mapping.generation_name(event), SpanKind.CLIENT,
                    mapping.generation_start(event, conversation_id, turn), conversation_id, turn,
                    at_end=self._defer and event.request.server_address is None)

    def _generation_ended(self, event: GenerationEnded) -> None:
        record = self._open.get(event.span_id)
        if record is not None and record.totals is not None:
            result = event.result
            found = mapping.generation_content(event) if self._on_span else {}
            record.totals.add_call(
                input_tokens=result.input_tokens if result else None,
                output_tokens=result.output_tokens if result else None,
                temperature=event.request.temperature,
                finish_reasons=result.finish_reasons if result and result.finish_reasons else (),
                input_messages=found.get(sc.GEN_AI_INPUT_MESSAGES),
                output_messages=found.get(sc.GEN_AI_OUTPUT_MESSAGES))
        self._end(event, mapping.generation_end(event), None if event.error is None else event.error_type,
                  mapping.generation_content)

    def _tool_started(self, event: ToolStarted) -> None:
        conversation_id, turn = self._inherited(event)
        self._start(event, mapping.tool_name(event), SpanKind.INTERNAL, mapping.tool_start(event, turn),
                    conversation_id, turn)

    def _tool_ended(self, event: ToolEnded) -> None:
        self._end(event, mapping.tool_end(event), mapping.tool_error_type(event), mapping.tool_content)

    def _span_started(self, event: SpanStarted) -> None:
        # A plain span's annotations are free-form, for the in-memory tree: none go out.
        conversation_id, turn = self._inherited(event)
        self._start(event, event.name, SpanKind.INTERNAL, {}, conversation_id, turn)

    def _span_ended(self, event: SpanEnded) -> None:
        self._end(event, mapping.error_attributes(event.error_type), event.error_type)
