"""`ShiftTree`: the listener that keeps the shift as an in-memory tree of `SpanNode`s.

It is what `render`, `usage_of`, the transcript and the handover note read. The node
attributes it writes (`turn`, `status`, `stop_reason`, ...) are the tree's own rendering
of the typed events, for people; no exporter reads them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cafe.trace.events import (
    GenerationEnded,
    GenerationStarted,
    NodeKind,
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
from cafe.trace.span import Generation, SpanNode, ToolCall


class ShiftTree:
    def __init__(self) -> None:
        self._roots: list[SpanNode] = []
        self._open: dict[int, SpanNode] = {}
        self._handlers: dict[type, Callable[[Any], None]] = {
            ShiftStarted: self._shift_started, ShiftEnded: self._shift_ended,
            PhaseStarted: self._phase_started, PhaseEnded: self._phase_ended,
            GenerationStarted: self._generation_started, GenerationEnded: self._generation_ended,
            ToolStarted: self._tool_started, ToolEnded: self._tool_ended,
            SpanStarted: self._span_started, SpanEnded: self._span_ended,
        }

    def on_event(self, event: TraceEvent) -> None:
        handler = self._handlers.get(type(event))
        if handler is not None:  # point events (consent, tickets) live on the ShiftRun
            handler(event)

    # --- reading -----------------------------------------------------------------------
    @property
    def roots(self) -> list[SpanNode]:
        return list(self._roots)

    def nodes(self, kind: str | None = None) -> list[SpanNode]:
        found = [node for root in self._roots for node in root.walk()]
        return found if kind is None else [node for node in found if node.kind == kind]

    def render(self) -> str:
        from cafe.trace.render import render_tree

        return render_tree(self._roots)

    # --- building ----------------------------------------------------------------------
    def _open_node(self, event: Any, name: str, kind: str, attrs: dict[str, Any],
                   generation: Generation | None = None) -> SpanNode:
        parent = self._open.get(event.parent_id) if event.parent_id is not None else None
        node = SpanNode(event.span_id, name, kind, attrs, event.at, parent=parent, generation=generation)
        (parent.children if parent is not None else self._roots).append(node)
        self._open[event.span_id] = node
        return node

    def _close_node(self, event: Any) -> SpanNode | None:
        node = self._open.pop(event.span_id, None)
        if node is not None:
            node.end = event.at
            if event.error is not None:
                node.error_type = event.error_type
                node.exception = event.error
        return node

    def _shift_started(self, event: ShiftStarted) -> None:
        self._open_node(event, "shift", NodeKind.SHIFT, {
            "agent": event.agent, "conversation_id": event.conversation_id,
            "model": event.model, "provider": event.provider,
        })

    def _shift_ended(self, event: ShiftEnded) -> None:
        node = self._close_node(event)
        if node is not None and event.stop_reason is not None:
            node.set(stop_reason=event.stop_reason, turns=event.turns, tickets=event.tickets)

    def _phase_started(self, event: PhaseStarted) -> None:
        attrs: dict[str, Any] = {"phase": event.phase}
        if event.turn is not None:
            attrs["turn"] = event.turn
        self._open_node(event, event.name, NodeKind.PHASE, attrs)

    def _phase_ended(self, event: PhaseEnded) -> None:
        node = self._close_node(event)
        if node is not None and event.stop_reason is not None:
            node.set(stop_reason=event.stop_reason)

    def _generation_started(self, event: GenerationStarted) -> None:
        r = event.request
        # The event's input is a read-only view of the shift's history: kept as it is, so a
        # node costs the same at the thousandth call as at the first.
        tools: Any = r.tools if isinstance(r.tools, list) or r.tools is None else list(r.tools)
        data = Generation(model=r.model, provider=r.provider, input=r.messages, temperature=r.temperature,
                          tools=tools,
                          server_address=r.server_address, server_port=r.server_port)
        self._open_node(event, event.name, NodeKind.GENERATION, dict(event.attrs), data)

    def _generation_ended(self, event: GenerationEnded) -> None:
        node = self._close_node(event)
        if node is not None and node.generation is not None and event.result is not None:
            result, g = event.result, node.generation
            # From the result already read, not a second parse of the response.
            g.response, g.output, g.tool_calls = result.response, result.output, list(result.tool_calls)
            g.usage = dict(result.response.get("usage") or {})

    def _tool_started(self, event: ToolStarted) -> None:
        self._open_node(event, event.name, NodeKind.TOOL, {"tool": event.name, "call_id": event.call_id})

    def _tool_ended(self, event: ToolEnded) -> None:
        node = self._close_node(event)
        if node is None:
            return
        if event.ticket_number is not None:
            node.set(ticket_number=event.ticket_number)
        if event.status is not None:
            node.set(status=event.status)
        node.tool_call = ToolCall(arguments=event.arguments, result=event.result)

    def _span_started(self, event: SpanStarted) -> None:
        self._open_node(event, event.name, event.kind, dict(event.attrs))

    def _span_ended(self, event: SpanEnded) -> None:
        node = self._close_node(event)
        if node is not None:
            node.set(**event.attrs)
