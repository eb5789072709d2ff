"""The trace as typed events (cafe/trace/events.py): listeners isolated, one fail-soft boundary,
and the events of a model call immutable and free of content in their reprs."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cafe import counter
from cafe.counter import consent, dispatch, executor, loop
from cafe.trace import (
    ConsentDecided,
    EventLog,
    GenerationEnded,
    GenerationStarted,
    NullTracer,
    Phase,
    PhaseEnded,
    PhaseStarted,
    ShiftEnded,
    ShiftStarted,
    TickClock,
    TicketFired,
    ToolEnded,
    ToolStarted,
    Tracer,
    export_fail_soft,
    fail_soft,
)
from cafe.trace.events import GenerationRequest, GenerationResult
from cafe.trace.outcomes import ConsentDecision, ConsentOutcome, StopReason, ToolStatus

from .helpers import approve_once, call


def _seed(tracer: Tracer) -> counter.ShiftRun:
    # The id is given: two runs of the seed shift compare equal, span for span.
    return counter.run_shift(counter.ScriptedClient(), counter.DEFAULT_SCRIPT, approve_once(), tracer=tracer,
                          conversation_id="shift-1")


def test_the_seed_shift_is_a_sequence_of_typed_events():
    log = EventLog()
    run = _seed(Tracer(clock=TickClock(), listeners=[log], tree=False))
    kinds = [type(e).__name__ for e in log.events]
    assert kinds == [
        "ShiftStarted", "PhaseStarted", "PhaseEnded",
        "PhaseStarted", "GenerationStarted", "GenerationEnded",
        "ToolStarted", "ToolEnded", "ToolStarted", "ToolEnded", "PhaseEnded",
        "PhaseStarted", "GenerationStarted", "GenerationEnded", "PhaseEnded",
        "PhaseStarted", "GenerationStarted", "GenerationEnded",
        "ToolStarted", "ConsentDecided", "ToolEnded", "PhaseEnded",
        "PhaseStarted", "GenerationStarted", "GenerationEnded",
        "ToolStarted", "TicketFired", "ToolEnded", "PhaseEnded",
        "PhaseStarted", "GenerationStarted", "GenerationEnded", "PhaseEnded",
        "PhaseStarted", "PhaseEnded", "ShiftEnded",
    ]
    [started] = log.of(ShiftStarted)
    assert (started.agent, started.conversation_id, started.parent_id) == ("cafe-counter", "shift-1", None)
    [ended] = log.of(ShiftEnded)
    assert ended.stop_reason is StopReason.ANSWERED is run.stop_reason
    assert (ended.turns, ended.tickets, ended.error) == (5, 1, None)
    assert [e.phase for e in log.of(PhaseStarted)] == [Phase.SETUP] + [Phase.TURN] * 5 + [Phase.WRAPUP]
    assert [e.stop_reason for e in log.of(PhaseEnded)] == [None] * 5 + [StopReason.ANSWERED, None]
    assert [e.status for e in log.of(ToolEnded)] == [ToolStatus.OK, ToolStatus.OK, ToolStatus.APPROVED,
                                                     ToolStatus.FIRED]
    [decided] = log.of(ConsentDecided)
    [fired] = log.of(TicketFired)
    assert (decided.outcome, fired.number, fired.turn) == (ConsentOutcome.APPROVED, 1, 4)
    # Parents: every tool and generation sits in a turn; ids pair the events of one span.
    turns = {e.span_id for e in log.of(PhaseStarted) if e.phase is Phase.TURN}
    assert all(e.parent_id in turns for e in log.of(GenerationStarted) + log.of(ToolStarted))
    assert sorted(e.span_id for e in log.of(GenerationStarted)) == sorted(e.span_id for e in log.of(GenerationEnded))
    usage = [(e.result.input_tokens, e.result.output_tokens) for e in log.of(GenerationEnded)]
    assert all(e.response is e.result.response for e in log.of(GenerationEnded))
    assert usage == [(60, 12), (80, 9), (60, 12), (60, 12), (80, 9)]
    # Clock readings: one per span edge, in order; a decision or a fired ticket is a point
    # inside its tool span, stamped with the reading its span started at.
    points = (ConsentDecided, TicketFired)
    edges = [e for e in log.events if not isinstance(e, points)]
    assert [e.at for e in edges] == [float(i) for i in range(len(edges))]
    started = {e.span_id: e.at for e in log.of(ToolStarted)}
    assert all(e.at == started[e.span_id] for e in log.events if isinstance(e, points))


def test_consent_decisions_and_fired_tickets_are_events_inside_their_tool_spans():
    order = {"items": ["latte"], "table": 4}
    client = counter.CannedClient([
        {"content": None, "tool_calls": [call("p1", "propose_order", {"items": ["latte"], "table": 9})]},
        {"content": None, "tool_calls": [call("f1", "fire_ticket", order)]},
        {"content": "Fired."},
    ])
    log = EventLog()
    responder = counter.make_responder([("edit", order), ("approve", None)])
    run = counter.run_shift(client, ["A latte, table 4."], responder, tracer=Tracer(listeners=[log]))
    assert run.stop_reason == StopReason.ANSWERED
    decided = log.of(ConsentDecided)
    assert [(e.round, e.outcome, e.decision) for e in decided] == [
        (1, ConsentOutcome.EDITED, ConsentDecision.EDIT), (2, ConsentOutcome.APPROVED, ConsentDecision.APPROVE)]
    [fired] = log.of(TicketFired)
    assert (fired.number, fired.turn) == (1, 2)
    tools = {e.span_id: e for e in log.of(ToolStarted)}
    assert tools[decided[0].span_id].name == "propose_order" and tools[fired.span_id].name == "fire_ticket"


class Boom(RuntimeError):
    pass


class Exploding:
    def __init__(self, on: type) -> None:
        self.on = on

    def on_event(self, event) -> None:
        if isinstance(event, self.on):
            raise Boom("listener broke on the customer's words: A latte")


@pytest.mark.parametrize("on", [ShiftStarted, GenerationStarted, GenerationEnded, ToolEnded, ShiftEnded])
def test_a_listener_that_raises_is_counted_and_never_reaches_the_shift(on):
    reports, after = [], EventLog()
    tracer = Tracer(clock=TickClock(), listeners=[Exploding(on), after], on_listener_error=reports.append)
    run = _seed(tracer)
    assert run.stop_reason == "answered"
    plain = Tracer(clock=TickClock())
    _seed(plain)
    assert tracer.render() == plain.render()  # the tree (first listener) heard everything
    assert len(after.events) == 36  # so did the listener after the broken one
    expected = len([e for e in after.events if isinstance(e, on)])
    assert tracer.listener_failures == expected == len(reports)
    assert {r.error_class for r in reports} == {"Boom"}
    assert str(reports[0]) == f"Exploding on {on.__name__} failed (Boom)"
    assert "latte" not in repr(reports) + repr(tracer.last_listener_failure)


def test_a_broken_error_hook_does_not_reach_the_shift_either():
    def hook(report):
        raise ValueError("hook broke")

    tracer = Tracer(listeners=[Exploding(ToolEnded)], on_listener_error=hook)
    assert _seed(tracer).stop_reason == "answered" and tracer.listener_failures == 4


def test_the_null_tracer_has_no_listeners_and_still_runs_the_shift():
    tracer = NullTracer()
    assert tracer.listeners == () and not tracer.listening
    run = _seed(tracer)
    assert run.stop_reason == "answered" and tracer.render() == ""


def test_the_seed_constants_are_the_enum_members():
    assert tuple(StopReason) == loop.STOP_REASONS
    assert loop.ANSWERED is StopReason.ANSWERED and loop.CANCELLED is ToolStatus.CANCELLED
    assert (dispatch.OK, dispatch.INVALID) == (ToolStatus.OK, ToolStatus.INVALID)
    assert executor.FIRED is ToolStatus.FIRED and executor.DUPLICATE is ToolStatus.DUPLICATE
    assert consent.APPROVE == "approve" and {"approve", "reject", "edit"} == consent.DECISIONS
    # A StrEnum member is its string for comparisons, hashing and JSON: old callers keep working.
    assert StopReason.ANSWERED == "answered" and {"answered": 1}[StopReason.ANSWERED] == 1
    assert json.dumps({"status": ToolStatus.FIRED}) == '{"status": "fired"}'
    failed = {s for s in ToolStatus if s.failed}
    assert failed == {"invalid", "refused", "aborted", "duplicate", "cancelled"}


def test_the_shift_run_and_its_logs_carry_enum_members():
    order = {"items": ["latte"], "table": 4}
    client = counter.CannedClient([
        {"content": None, "tool_calls": [call("f1", "fire_ticket", order), call("p1", "price_check", {"item": "x"})]},
    ])
    run = counter.run_shift(client, ["A latte."], counter.make_responder([]))
    assert run.stop_reason is StopReason.CONSENT_VIOLATION
    assert [e.status for e in run.tool_log] == [ToolStatus.REFUSED, ToolStatus.CANCELLED]
    assert run.fires[0].status is ToolStatus.REFUSED


@settings(database=None, max_examples=60, deadline=None)
@given(message=st.text(min_size=1, max_size=80), name=st.sampled_from(["ConnectionError", "TimeoutError", "OSError"]))
def test_export_fail_soft_names_the_class_and_never_the_message(message, name):
    error_type = type(name, (Exception,), {})

    def dead(spans):
        raise error_type(message)

    tracer = Tracer(exporter=dead)
    _seed(tracer)
    assert export_fail_soft(tracer) == name
    report = fail_soft(tracer.export, "export")
    assert report is not None and report.error_class == name and str(report) == f"export failed ({name})"


def test_fail_soft_lets_keyboard_interrupt_through():
    def interrupted():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fail_soft(interrupted)
    assert fail_soft(lambda: None) is None


def test_an_answer_of_no_known_kind_is_a_no_and_its_text_stays_out_of_the_event():
    client = counter.CannedClient([
        {"content": None, "tool_calls": [call("p1", "propose_order", {"items": ["latte"], "table": 4})]},
        {"content": "Nothing was ordered."},
    ])
    log = EventLog()
    run = counter.run_shift(client, ["A latte, table 4."], lambda rendered, ticket: ("maybe, says Zed", None),
                         tracer=Tracer(listeners=[log]))
    [decided] = log.of(ConsentDecided)
    assert (decided.outcome, decided.decision) == (ConsentOutcome.UNKNOWN_DECISION, None)
    assert "Zed" not in repr(log.events)
    assert run.tool_log[0].status is ToolStatus.REJECTED


# The events a model call makes stay immutable values shared by every listener, and their
# reprs carry no content (messages, a response, an exception's message).

CANARY = "CANARY my card number is 4111"
RESPONSE = {"id": "r1", "model": "m", "choices": [{"message": {"content": CANARY}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}


def _events():
    request = GenerationRequest("m", "openai", [{"role": "user", "content": CANARY}], 0.0)
    result = GenerationResult.of(RESPONSE)
    started = GenerationStarted(1, None, 0.5, "chat m", request, {"note": 1})
    ended = GenerationEnded(1, None, 1.5, request, result, error=ValueError(CANARY), started_at=0.5)
    return request, result, started, ended


@pytest.mark.parametrize("index,field", [(0, "model"), (1, "output"), (2, "name"), (3, "result")])
def test_a_call_event_cannot_be_changed_by_a_listener(index, field):
    event = _events()[index]
    with pytest.raises(AttributeError):
        setattr(event, field, "changed")


def test_call_events_read_as_before():
    request, result, started, ended = _events()
    assert (result.input_tokens, result.output_tokens, result.finish_reasons) == (3, 4, ("stop",))
    assert result.output == CANARY
    assert ended.error_type == "ValueError" and ended.response is RESPONSE and ended.started_at == 0.5
    assert started.request is request and started.attrs == {"note": 1}
    assert GenerationEnded(2, 1, 1.0, request).result is None


def test_the_reprs_of_a_result_and_an_ended_call_hold_no_content():
    _, result, _, ended = _events()
    assert CANARY not in repr(result)
    assert CANARY not in repr(ended)
    assert "ValueError" in repr(ended) and "total_tokens=7" in repr(result)
