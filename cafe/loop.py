"""The shift loop: customer lines in, one model call per turn, tool calls run in order.

A turn is one model call. The loop stops with one of the named stop reasons below, and
returns a `ShiftRun` that holds everything a debrief or a replay needs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cafe.clients.base import ChatClient, Message, first_message, tool_calls_of
from cafe.consent import Approval, ConsentGate, GateEntry, Responder
from cafe.dispatch import ToolDispatcher
from cafe.executor import FireAttempt, ProtectedExecutor
from cafe.orders import FiredTicket, OrderState, ToolLogEntry
from cafe.prompt import SYSTEM_PROMPT
from cafe.repair import RepairBudget
from cafe.tools import TOOL_SCHEMAS
from cafe.trace.span import PHASE, SHIFT, TOOL, ToolCall
from cafe.trace.tracer import NullTracer, Tracer
from cafe.trace.tracing_client import TracingClient

ANSWERED = "answered"
SCRIPT_DONE = "script_done"
TURN_CAP = "turn_cap"
CONSENT_VIOLATION = "consent_violation"
RETRIES_EXHAUSTED = "retries_exhausted"
STOP_REASONS = (ANSWERED, SCRIPT_DONE, TURN_CAP, CONSENT_VIOLATION, RETRIES_EXHAUSTED)

AGENT_NAME = "cafe-counter"
DEFAULT_CONVERSATION_ID = "shift-1"
CANCELLED = "cancelled"


@dataclass
class ShiftRun:
    messages: list[Message]
    state: OrderState
    approvals: list[Approval]
    gate_log: list[GateEntry]
    fires: list[FireAttempt]
    stop_reason: str
    turns_used: int
    model_calls: int
    repairs_used: int
    repair_state: str
    conversation_id: str
    model: str

    @property
    def tickets(self) -> list[FiredTicket]:
        return list(self.state.fired)

    @property
    def tool_log(self) -> list[ToolLogEntry]:
        return list(self.state.tool_log)


@dataclass
class _Turn:
    number: int
    stop_reason: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


def _compact(result: dict[str, Any]) -> str:
    return json.dumps(result, separators=(",", ":"), sort_keys=True)


def run_shift(
    client: ChatClient,
    user_turns: Sequence[str],
    responder: Responder,
    *,
    tracer: Tracer | None = None,
    max_turns: int = 8,
    max_repairs: int = 2,
    conversation_id: str = DEFAULT_CONVERSATION_ID,
    temperature: float = 0.0,
    system_prompt: str = SYSTEM_PROMPT,
) -> ShiftRun:
    tracer = tracer if tracer is not None else NullTracer()
    if not isinstance(tracer, NullTracer) and not isinstance(client, TracingClient):
        client = TracingClient(client, tracer)
    lines = list(user_turns)
    with tracer.span(
        "shift", SHIFT, agent=AGENT_NAME, conversation_id=conversation_id,
        model=client.model, provider=client.provider,
    ) as shift_span:
        with tracer.span("setup", PHASE, phase="setup"):
            state = OrderState()
            gate = ConsentGate(responder)
            executor = ProtectedExecutor(state, gate.approvals)
            budget = RepairBudget(max_repairs)
            dispatcher = ToolDispatcher(state, gate, executor, budget)
            messages: list[Message] = [{"role": "system", "content": system_prompt}]

        stop_reason: str | None = None
        turns = 0
        needs_customer = True
        while stop_reason is None:
            if needs_customer and not lines:
                stop_reason = SCRIPT_DONE
                break
            if turns >= max_turns:
                stop_reason = TURN_CAP
                break
            turns += 1
            with tracer.span(f"turn {turns}", PHASE, phase="turn", turn=turns) as turn_span:
                if needs_customer:
                    messages.append({"role": "user", "content": lines.pop(0)})
                response = client.chat(messages, TOOL_SCHEMAS, temperature)
                message = first_message(response)
                messages.append(message)
                calls = tool_calls_of(message)
                if calls:
                    stop_reason = _run_tool_calls(tracer, dispatcher, state, messages, calls, turns)
                    needs_customer = False
                elif lines:
                    needs_customer = True
                else:
                    stop_reason = ANSWERED
                if stop_reason:
                    turn_span.set(stop_reason=stop_reason)

        with tracer.span("wrapup", PHASE, phase="wrapup"):
            shift_span.set(stop_reason=stop_reason, turns=turns, tickets=len(state.fired))
            return ShiftRun(
                messages=messages,
                state=state,
                approvals=list(gate.approvals),
                gate_log=list(gate.log),
                fires=list(executor.attempts),
                stop_reason=stop_reason,
                turns_used=turns,
                model_calls=turns,
                repairs_used=budget.used,
                repair_state=budget.state,
                conversation_id=conversation_id,
                model=client.model,
            )


def _run_tool_calls(
    tracer: Tracer,
    dispatcher: ToolDispatcher,
    state: OrderState,
    messages: list[Message],
    calls: list[dict[str, Any]],
    turn: int,
) -> str | None:
    """Run a batch in order; after a call that ends the shift, the rest are cancelled
    (answered with an error so the conversation stays well-formed)."""
    stop_reason: str | None = None
    for call in calls:
        function = call.get("function") or {}
        name = str(function.get("name"))
        call_id = str(call.get("id"))
        with tracer.span(name, TOOL, tool=name, call_id=call_id) as tool_span:
            if stop_reason is None:
                outcome = dispatcher.run(name, function.get("arguments"), turn=turn, call_id=call_id)
                result, status = outcome.result, outcome.status
                stop_reason = outcome.stop_reason
                if outcome.ticket_number is not None:
                    tool_span.set(ticket_number=outcome.ticket_number)
            else:
                result = {"error": f"cancelled: an earlier call in this batch ended the shift ({stop_reason})"}
                status = CANCELLED
            tool_span.set(status=status)
            content = _compact(result)
            tool_span.tool_call = ToolCall(arguments=function.get("arguments"), result=content)
        state.tool_log.append(ToolLogEntry(turn, call_id, name, status))
        messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
    return stop_reason
