"""The shift loop: customer lines in, one model call per turn, tool calls run in order.

A turn is one model call. The loop stops with one of the named stop reasons below, and
returns a `ShiftRun` that holds everything a debrief or a replay needs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cafe.counter.clients.base import ChatClient, Message, first_message, tool_calls_of
from cafe.counter.clients.tracing import TracingClient
from cafe.counter.consent import DECISIONS, Approval, ConsentGate, GateEntry, Responder
from cafe.counter.dispatch import ToolDispatcher
from cafe.counter.executor import FireAttempt, ProtectedExecutor
from cafe.counter.orders import FiredTicket, OrderState, ToolLogEntry
from cafe.counter.prompt import SYSTEM_PROMPT
from cafe.counter.repair import RepairBudget
from cafe.counter.tools import TOOL_NAMES, TOOL_SCHEMAS
from cafe.errors import ScriptError
from cafe.trace.events import Phase
from cafe.trace.ids import new_conversation_id as new_conversation_id
from cafe.trace.outcomes import ConsentDecision, StopReason, ToolStatus
from cafe.trace.tracer import NullTracer, Tracer

# Module-level names for the stop reasons, kept importable: they are the enum's members.
ANSWERED = StopReason.ANSWERED
SCRIPT_DONE = StopReason.SCRIPT_DONE
TURN_CAP = StopReason.TURN_CAP
CONSENT_VIOLATION = StopReason.CONSENT_VIOLATION
RETRIES_EXHAUSTED = StopReason.RETRIES_EXHAUSTED
STOP_REASONS = tuple(StopReason)

AGENT_NAME = "cafe-counter"
CANCELLED = ToolStatus.CANCELLED


@dataclass
class ShiftRun:
    messages: list[Message]
    state: OrderState
    approvals: list[Approval]
    gate_log: list[GateEntry]
    fires: list[FireAttempt]
    stop_reason: StopReason
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
    stop_reason: StopReason | None = None
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
    conversation_id: str | None = None,
    temperature: float = 0.0,
    system_prompt: str = SYSTEM_PROMPT,
) -> ShiftRun:
    """`conversation_id` names the conversation on every span; without one the shift gets
    its own (`new_conversation_id`)."""
    if isinstance(user_turns, str):  # its characters would each be taken for a customer line
        raise ScriptError("the customer lines must be a list of strings, not one string")
    tracer = tracer if tracer is not None else NullTracer()
    conversation_id = conversation_id if conversation_id is not None else new_conversation_id()
    if tracer.listening and not isinstance(client, TracingClient):
        client = TracingClient(client, tracer)
    lines = list(user_turns)
    next_line = 0  # an index, not pop(0): taking a line costs the same at any length of script
    with tracer.shift(
        agent=AGENT_NAME, conversation_id=conversation_id, model=client.model, provider=client.provider,
    ) as shift_span:
        with tracer.phase(Phase.SETUP):
            state = OrderState()
            gate = ConsentGate(responder)
            executor = ProtectedExecutor(state, gate.approvals)
            budget = RepairBudget(max_repairs)
            dispatcher = ToolDispatcher(state, gate, executor, budget)
            messages: list[Message] = [{"role": "system", "content": system_prompt}]
            # Only ever appended to: every call's input shares one history of it.
            tracer.follow(messages)

        stop_reason: StopReason | None = None
        turns = 0
        needs_customer = True
        while stop_reason is None:
            if needs_customer and next_line == len(lines):
                stop_reason = StopReason.SCRIPT_DONE
                break
            if turns >= max_turns:
                stop_reason = StopReason.TURN_CAP
                break
            turns += 1
            with tracer.phase(Phase.TURN, turns) as turn_span:
                if needs_customer:
                    messages.append({"role": "user", "content": lines[next_line]})
                    next_line += 1
                response = client.chat(messages, TOOL_SCHEMAS, temperature)
                message = first_message(response)
                messages.append(message)
                calls = tool_calls_of(message)
                if calls:
                    stop_reason = _run_tool_calls(tracer, dispatcher, state, messages, calls, turns)
                    needs_customer = False
                elif next_line < len(lines):
                    needs_customer = True
                else:
                    stop_reason = StopReason.ANSWERED
                turn_span.stop_reason = stop_reason

        with tracer.phase(Phase.WRAPUP):
            shift_span.finish(stop_reason, turns, len(state.fired), budget.used)
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
) -> StopReason | None:
    """Run a batch in order; after a call that ends the shift, the rest are cancelled
    (answered with an error so the conversation stays well-formed)."""
    stop_reason: StopReason | None = None
    gate_log = dispatcher.gate.log
    for call in calls:
        function = call.get("function") or {}
        name = str(function.get("name"))
        call_id = str(call.get("id"))
        arguments = function.get("arguments")
        with tracer.tool(name, call_id=call_id, arguments=arguments, defined=name in TOOL_NAMES) as tool_span:
            status: ToolStatus
            if stop_reason is None:
                seen = len(gate_log)
                outcome = dispatcher.run(name, arguments, turn=turn, call_id=call_id)
                result, status = outcome.result, outcome.status
                stop_reason = outcome.stop_reason
                for entry in gate_log[seen:]:
                    known = entry.decision in DECISIONS
                    tracer.consent_decided(entry.turn, entry.round, entry.status,
                                           ConsentDecision(entry.decision) if known else None)
                if outcome.ticket_number is not None:
                    tool_span.ticket_number = outcome.ticket_number
                    tracer.ticket_fired(outcome.ticket_number, turn)
            else:
                result = {"error": f"cancelled: an earlier call in this batch ended the shift ({stop_reason})"}
                status = ToolStatus.CANCELLED
            tool_span.status = status
            content = _compact(result)
            tool_span.result = content
        state.tool_log.append(ToolLogEntry(turn, call_id, name, status))
        messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
    return stop_reason
