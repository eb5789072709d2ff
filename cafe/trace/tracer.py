"""The tracer: the source of a shift's typed events, delivered to its listeners.

`run_shift` opens typed spans (`shift`, `phase`, `generation`, `tool`) and reports point
events (`consent_decided`, `ticket_fired`); each becomes a frozen event value
(`cafe.trace.events`) handed to every listener in order. The in-memory tree (`ShiftTree`:
`render`, `nodes`, `usage_of`) is the default first listener; `cafe_otel` adds a span
listener, tests add probes. A listener that raises is isolated through the fail-soft
boundary: counted in `listener_failures`, reported by class name to `on_listener_error`,
and never raised into the shift.

`export()` propagates whatever the exporter raises, on purpose: nobody should be able to
mistake a dead backend for a good one. `export_fail_soft` is where that failure is turned
into a returned name.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from types import TracebackType
from typing import Any, Self

from cafe.trace.clock import Clock
from cafe.trace.events import (
    ConsentDecided,
    GenerationEnded,
    GenerationRequest,
    GenerationResult,
    GenerationStarted,
    NodeKind,
    Phase,
    PhaseEnded,
    PhaseStarted,
    ShiftEnded,
    ShiftStarted,
    SpanEnded,
    SpanStarted,
    TicketFired,
    ToolEnded,
    ToolStarted,
    TraceEvent,
    TraceListener,
)
from cafe.trace.failsoft import FailureReport, report_failure
from cafe.trace.history import Growth, History, HistoryView
from cafe.trace.outcomes import ConsentDecision, ConsentOutcome, StopReason, ToolStatus
from cafe.trace.span import SpanNode
from cafe.trace.tree import ShiftTree

Exporter = Callable[[Sequence[dict[str, Any]]], Any]
_new = tuple.__new__


class _Scope:
    """One open span: `with` emits its started event on entry and its ended event on exit
    (with the exception, when one ends it; the exception is re-raised)."""

    __slots__ = ("_tracer", "parent_id", "span_id", "started_at")

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer
        self.span_id = 0
        self.parent_id: int | None = None
        self.started_at = 0.0

    def __enter__(self) -> Self:
        tracer = self._tracer
        stack = tracer._stack
        self.parent_id = stack[-1] if stack else None
        self.span_id = tracer._next_id
        tracer._next_id += 1
        stack.append(self.span_id)
        at = self.started_at = tracer._last = tracer._clock()
        if tracer._listeners:  # nobody listening (a NullTracer): no event to build
            tracer._emit(self._started(at))
        return self

    def __exit__(self, exc_type: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        tracer = self._tracer
        at = tracer._last = tracer._clock()
        tracer._stack.pop()
        if tracer._listeners:
            tracer._emit(self._ended(at, error))

    def _started(self, at: float) -> TraceEvent:
        raise NotImplementedError

    def _ended(self, at: float, error: BaseException | None) -> TraceEvent:
        raise NotImplementedError


class ShiftScope(_Scope):
    __slots__ = ("agent", "conversation_id", "model", "provider", "repairs", "stop_reason", "tickets", "turns")

    def __init__(self, tracer: Tracer, agent: str, conversation_id: str | None,
                 model: str | None, provider: str | None) -> None:
        super().__init__(tracer)
        self.agent, self.conversation_id, self.model, self.provider = agent, conversation_id, model, provider
        self.stop_reason: StopReason | None = None
        self.turns: int | None = None
        self.tickets: int | None = None
        self.repairs: int | None = None

    def finish(self, stop_reason: StopReason, turns: int, tickets: int, repairs: int | None = None) -> None:
        """What the shift came to; sent with the shift's ended event."""
        self.stop_reason, self.turns, self.tickets, self.repairs = stop_reason, turns, tickets, repairs

    def _started(self, at: float) -> ShiftStarted:
        return ShiftStarted(self.span_id, self.parent_id, at, self.agent, self.conversation_id,
                            self.model, self.provider)

    def __exit__(self, exc_type: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        # A conversation followed during the shift is its own: the next shift has another.
        self._tracer.follow(None)
        super().__exit__(exc_type, error, traceback)

    def _ended(self, at: float, error: BaseException | None) -> ShiftEnded:
        return ShiftEnded(self.span_id, self.parent_id, at, error=error, stop_reason=self.stop_reason,
                          turns=self.turns, tickets=self.tickets, repairs=self.repairs)


class PhaseScope(_Scope):
    __slots__ = ("phase", "stop_reason", "turn")

    def __init__(self, tracer: Tracer, phase: Phase, turn: int | None) -> None:
        super().__init__(tracer)
        self.phase, self.turn = phase, turn
        self.stop_reason: StopReason | None = None

    def _started(self, at: float) -> PhaseStarted:
        return PhaseStarted(self.span_id, self.parent_id, at, self.phase, self.turn)

    def _ended(self, at: float, error: BaseException | None) -> PhaseEnded:
        return PhaseEnded(self.span_id, self.parent_id, at, self.phase, self.turn, self.stop_reason,
                          error=error)


class GenerationScope(_Scope):
    __slots__ = ("attrs", "name", "request", "result")

    def __init__(self, tracer: Tracer, name: str, request: GenerationRequest, attrs: Mapping[str, Any]) -> None:
        super().__init__(tracer)
        self.name, self.request, self.attrs = name, request, attrs
        self.result: GenerationResult | None = None

    def record_response(self, response: Mapping[str, Any]) -> None:
        if self._tracer._listeners:  # read once here, for every listener
            self.result = GenerationResult.of(response)

    # A model call's events are built with `tuple.__new__` and every field in order: a
    # named tuple's own constructor is a Python function, one more call on every call.
    def _started(self, at: float) -> GenerationStarted:
        return _new(GenerationStarted, (self.span_id, self.parent_id, at, self.name, self.request, self.attrs))

    def _ended(self, at: float, error: BaseException | None) -> GenerationEnded:
        return _new(GenerationEnded, (self.span_id, self.parent_id, at, self.request, self.result, error,
                                      self.started_at))


class ToolScope(_Scope):
    __slots__ = ("arguments", "call_id", "defined", "name", "result", "status", "ticket_number")

    def __init__(self, tracer: Tracer, name: str, call_id: str, arguments: str | None, defined: bool) -> None:
        super().__init__(tracer)
        self.name, self.call_id, self.arguments, self.defined = name, call_id, arguments, defined
        self.status: ToolStatus | None = None
        self.ticket_number: int | None = None
        self.result: str | None = None

    def _started(self, at: float) -> ToolStarted:
        return ToolStarted(self.span_id, self.parent_id, at, self.name, self.call_id, self.arguments, self.defined)

    def _ended(self, at: float, error: BaseException | None) -> ToolEnded:
        return ToolEnded(self.span_id, self.parent_id, at, self.name, self.call_id, self.status,
                         self.ticket_number, self.arguments, self.result, self.defined, error=error)


class SpanScope(_Scope):
    """A plain span: a name, a kind and annotations (`set`) that only the tree shows."""

    __slots__ = ("_added", "kind", "name", "start_attrs")

    def __init__(self, tracer: Tracer, name: str, kind: str, attrs: dict[str, Any]) -> None:
        super().__init__(tracer)
        self.name, self.kind, self.start_attrs = name, kind, attrs
        self._added: dict[str, Any] = {}

    @property
    def attrs(self) -> dict[str, Any]:
        return {**self.start_attrs, **self._added}

    def set(self, **attrs: Any) -> None:
        self._added.update(attrs)

    def _started(self, at: float) -> SpanStarted:
        return SpanStarted(self.span_id, self.parent_id, at, self.name, self.kind, dict(self.start_attrs))

    def _ended(self, at: float, error: BaseException | None) -> SpanEnded:
        return SpanEnded(self.span_id, self.parent_id, at, self.name, self.kind, dict(self._added), error=error)


ListenerErrorHook = Callable[[FailureReport], None]


class Tracer:
    def __init__(
        self,
        exporter: Exporter | None = None,
        clock: Clock | None = None,
        *,
        keep_inputs: bool = True,
        listeners: Iterable[TraceListener] = (),
        tree: bool = True,
        on_listener_error: ListenerErrorHook | None = None,
    ) -> None:
        """`tree=False` leaves out the in-memory tree (then `render`, `nodes` and `usage_of`
        see nothing): for a tracer whose only job is to feed other listeners.
        `keep_inputs=False` keeps no model call's input messages: for listeners that
        export metadata only, nothing is frozen or copied."""
        self._exporter = exporter
        self.keep_inputs = keep_inputs
        self._clock: Clock = clock or time.perf_counter
        self.tree: ShiftTree | None = ShiftTree() if tree else None
        self._listeners: list[TraceListener] = [self.tree] if self.tree is not None else []
        self._listeners.extend(listeners)
        self._on_listener_error = on_listener_error
        self._stack: list[int] = []
        self._next_id = 1
        self._last = 0.0  # the latest clock reading: point events take it, not a tick of their own
        self.listener_failures = 0
        self.inputs_not_kept = 0  # calls whose input could not be copied (so none was kept)
        # The conversation `follow` was given, and the shared history its calls view.
        self._followed: list[Any] | None = None
        self._history = History()
        self._growth = Growth()
        self.last_listener_failure: FailureReport | None = None

    # --- listeners -------------------------------------------------------------------
    @property
    def listeners(self) -> tuple[TraceListener, ...]:
        return tuple(self._listeners)

    @property
    def listening(self) -> bool:
        return bool(self._listeners)

    def add_listener(self, listener: TraceListener) -> None:
        self._listeners.append(listener)

    def _emit(self, event: TraceEvent) -> None:
        for listener in self._listeners:
            try:
                listener.on_event(event)
            except Exception as error:  # isolation: a listener never fails the shift
                self._listener_failed(listener, event, error)

    def _listener_failed(self, listener: TraceListener, event: TraceEvent, error: Exception) -> None:
        self.listener_failures += 1
        report = report_failure(error, f"{type(listener).__name__} on {type(event).__name__}")
        self.last_listener_failure = report
        if self._on_listener_error is not None:
            with suppress(Exception):  # a broken error hook must not fail the shift either
                self._on_listener_error(report)

    # --- typed spans and events (what run_shift emits) ---------------------------------
    def shift(self, *, agent: str, conversation_id: str | None = None, model: str | None = None,
              provider: str | None = None) -> ShiftScope:
        return ShiftScope(self, agent, conversation_id, model, provider)

    def phase(self, phase: Phase, turn: int | None = None) -> PhaseScope:
        return PhaseScope(self, phase, turn)

    def generation(
        self,
        name: str,
        *,
        model: str,
        provider: str,
        input: list[dict[str, Any]],
        temperature: float | None = None,
        tools: list[dict[str, Any]] | None = None,
        server_address: str | None = None,
        server_port: int | None = None,
        **attrs: Any,
    ) -> GenerationScope:
        request = _new(GenerationRequest, (model, provider, self._snapshot(input) if self.keep_inputs else (),
                                           temperature, tools, server_address, server_port, None))
        return GenerationScope(self, name, request, attrs)

    def follow(self, messages: list[Any] | None) -> None:
        """Share one history among the calls that are sent `messages` (None: stop).

        The promise of whoever calls this (the shift loop): the list only grows at its end,
        and a message in it does not change once a call has been sent it. Each message is
        then frozen once, when a call first sends it, and a generation's input is a view of
        that one history: constant work and memory per call whatever the length of the
        conversation. Should the list change other than at its end (found in constant
        time: shorter, or its last frozen message replaced), the call's input is frozen
        whole into a new history; the views taken before stay as they were.

        Any other list a call is sent is frozen whole for that call."""
        self._followed = messages
        self._history = History()
        self._growth.forget()

    def _snapshot(self, messages: Any) -> Any:
        """A read-only view of a call's input for the tree and the listeners, or none when
        it cannot be copied (a cycle; not a list, which every client refuses): telemetry
        goes without it, the call itself goes on and its client gives the input's verdict."""
        try:
            followed = self._followed
            if followed is not None and messages is followed:
                return self._followed_view(followed)
            if not isinstance(messages, list | tuple):  # a generator must not be used up here
                raise TypeError("not a list of messages")
            return History(messages).view()
        except (RecursionError, TypeError, ValueError):
            self.inputs_not_kept += 1
            return ()

    def _followed_view(self, messages: list[Any]) -> HistoryView:
        start = self._growth.new_from(messages)
        if start == 0 and len(self._history):
            self._history = History()  # changed behind the promise: earlier views keep theirs
        self._history.extend(messages[start:] if start else messages)
        self._growth.saw(messages)
        return self._history.view()

    def tool(self, name: str, *, call_id: str, arguments: str | None = None, defined: bool = False) -> ToolScope:
        """A tool's span. `defined`: the agent defines a tool of this name (telemetry shows
        the name; otherwise it is the model's free text, shown as `unknown_tool`)."""
        return ToolScope(self, name, call_id, arguments, defined)

    def span(self, name: str, kind: str = NodeKind.SPAN, **attrs: Any) -> SpanScope:
        return SpanScope(self, name, kind, attrs)

    def _here(self) -> tuple[int, int | None]:
        if not self._stack:
            raise RuntimeError("a point event needs an open span to belong to")
        return self._stack[-1], (self._stack[-2] if len(self._stack) > 1 else None)

    def consent_decided(self, turn: int, round: int, outcome: ConsentOutcome,
                        decision: ConsentDecision | None = None) -> None:
        span_id, parent_id = self._here()
        self._emit(ConsentDecided(span_id, parent_id, self._last, turn, round, outcome, decision))

    def ticket_fired(self, number: int, turn: int) -> None:
        span_id, parent_id = self._here()
        self._emit(TicketFired(span_id, parent_id, self._last, number, turn))

    # --- the in-memory tree (empty without one) ----------------------------------------
    @property
    def roots(self) -> list[SpanNode]:
        return self.tree.roots if self.tree is not None else []

    def nodes(self, kind: str | None = None) -> list[SpanNode]:
        return self.tree.nodes(kind) if self.tree is not None else []

    def generations(self) -> list[SpanNode]:
        return self.nodes(NodeKind.GENERATION)

    def render(self) -> str:
        return self.tree.render() if self.tree is not None else ""

    def export(self) -> Any:
        """The lesson's way out: the tree as plain data to `exporter`, raising what it raises
        (`cafe.trace.export_fail_soft` names the failure instead). Listeners are the way out
        for anything new: they hear each event as it happens (`cafe.trace.export`)."""
        if self._exporter is None:
            return None
        return self._exporter([root.as_dict() for root in self.roots])


def _zero() -> float:
    return 0.0


class NullTracer(Tracer):
    """A tracer with no listeners, so instrumentation needs no `if tracer:`. With nobody to
    hear them no events are built, so what is left is the bookkeeping of span ids and the
    stack (bench figure 1: "cafe NullTracer generation")."""

    def __init__(self, exporter: Exporter | None = None, clock: Clock | None = None) -> None:
        # Tracer's signature; both arguments are ignored: there is nothing to export or time.
        super().__init__(clock=_zero, keep_inputs=False, tree=False)
