"""Consent: the synthetic customer, the gate, the protected executor, and fire-once."""

from __future__ import annotations

import pytest

from cafe import TickClock, Tracer
from cafe.counter import MENU, CannedClient, ConsentGate, ProtectedExecutor, make_responder, run_shift
from cafe.counter.orders import OrderState, Ticket

from .helpers import approve_once, call, calls, say, tool_results


def _ticket(items=("latte",), table=4) -> Ticket:
    return Ticket.build(table, list(items), allergen_checked=False)


def _menu_total(items) -> float:
    return sum(MENU[name].price_cents for name in items) / 100


# --- make_responder -------------------------------------------------------------------

def test_responder_pops_decisions_in_order_then_rejects():
    respond = make_responder([("edit", {"items": ["espresso"], "table": 2}), ("approve", None)])
    ticket = _ticket()
    assert respond(ticket.render(), ticket) == ("edit", {"items": ["espresso"], "table": 2})
    assert respond(ticket.render(), ticket) == ("approve", None)
    assert respond(ticket.render(), ticket) == ("reject", None)
    assert respond(ticket.render(), ticket) == ("reject", None)


def test_an_empty_responder_rejects():
    assert make_responder([])("", _ticket()) == ("reject", None)


def test_each_responder_has_its_own_queue():
    decisions = [("approve", None)]
    first, second = make_responder(decisions), make_responder(decisions)
    assert first("", _ticket())[0] == "approve"
    assert second("", _ticket())[0] == "approve"  # not drained by the first
    assert decisions == [("approve", None)]


def test_unknown_decision_is_refused_up_front():
    with pytest.raises(ValueError, match="maybe"):
        make_responder([("maybe", None)])


def test_a_responder_keeps_the_decisions_it_was_given_however_many_it_has_used():
    respond = make_responder(iter([("approve", None), ("reject", None)]))  # any iterable, read once
    assert respond("", _ticket()) == ("approve", None)
    assert respond.decisions == (("approve", None), ("reject", None))
    assert repr(respond) == "SyntheticCustomer(2 decision(s), 1 left)"


# --- the gate -------------------------------------------------------------------------

class Watching:
    """A customer that records what it was shown."""

    def __init__(self, decisions):
        self.shown: list[str] = []
        self.tickets: list[Ticket] = []
        self._respond = make_responder(decisions)

    def __call__(self, rendered, ticket):
        self.shown.append(rendered)
        self.tickets.append(ticket)
        return self._respond(rendered, ticket)


def test_gate_approve_returns_the_shown_ticket():
    customer = Watching([("approve", None)])
    gate = ConsentGate(customer)
    ticket = _ticket(("latte", "croissant"), 6)
    outcome = gate.review(ticket, turn=3, allergen_checked=set())
    assert outcome.status == "approved"
    assert outcome.approval.ticket == ticket
    assert outcome.approval.turn == 3
    assert customer.shown == [ticket.render()]
    assert gate.approvals == [outcome.approval]
    assert [(e.turn, e.round, e.decision, e.status) for e in gate.log] == [(3, 1, "approve", "approved")]


def test_gate_reject_returns_no_approval():
    gate = ConsentGate(make_responder([("reject", None)]))
    outcome = gate.review(_ticket(), turn=1, allergen_checked=set())
    assert outcome.status == "rejected"
    assert outcome.approval is None
    assert gate.approvals == []


def test_gate_edit_is_revalidated_and_shown_again_before_approval():
    customer = Watching([("edit", {"items": ["espresso", "croissant"], "table": 5}), ("approve", None)])
    gate = ConsentGate(customer)
    outcome = gate.review(_ticket(("latte",), 4), turn=2, allergen_checked={"croissant", "espresso"})
    assert outcome.status == "approved"
    approved = outcome.approval.ticket
    assert approved.table == 5
    assert approved.items == ("espresso", "croissant")
    assert approved.total_eur == _menu_total(["espresso", "croissant"])
    assert approved.allergen_checked is True
    assert len(customer.shown) == 2
    assert customer.shown[1] == approved.render()
    assert customer.shown[0] != customer.shown[1]
    assert [e.status for e in gate.log] == ["edited", "approved"]


@pytest.mark.parametrize(
    "bad_edit",
    [
        {"items": ["cheese omelette"], "table": 5},
        {"items": ["latte"], "table": True},
        {"items": [], "table": 5},
        {"items": ["latte"], "table": 5, "total_eur": 0},
        "not an object",
    ],
)
def test_an_invalid_edit_keeps_the_old_ticket(bad_edit):
    customer = Watching([("edit", bad_edit), ("approve", None)])
    gate = ConsentGate(customer)
    original = _ticket(("latte",), 4)
    outcome = gate.review(original, turn=1, allergen_checked=set())
    assert [e.status for e in gate.log] == ["edit_invalid", "approved"]
    assert outcome.approval.ticket == original
    assert customer.shown == [original.render(), original.render()]


def test_gate_rounds_are_bounded():
    customer = Watching([("edit", {"items": ["espresso"], "table": 2})] * 10)
    gate = ConsentGate(customer, max_rounds=3)
    outcome = gate.review(_ticket(), turn=1, allergen_checked=set())
    assert outcome.status == "rounds_exhausted"
    assert outcome.approval is None
    assert len(customer.shown) == 3
    assert gate.approvals == []


# --- the protected executor -----------------------------------------------------------

def _approved(gate_items=("latte", "croissant"), table=4):
    state = OrderState()
    gate = ConsentGate(make_responder([("approve", None)]))
    gate.review(_ticket(gate_items, table), turn=1, allergen_checked=set())
    return state, gate, ProtectedExecutor(state, gate.approvals)


def test_executor_fires_the_approved_payload_not_the_request():
    state, gate, executor = _approved(("latte", "croissant"), 4)
    attempt = executor.fire({"items": ["croissant", "latte"], "table": 4}, turn=2, call_id="c1")
    assert attempt.status == "fired"
    assert attempt.ticket_number == 1
    [fired] = state.fired
    assert fired.ticket is gate.approvals[0].ticket
    assert fired.ticket.items == ("latte", "croissant")  # the approved order, not the request's
    assert (fired.number, fired.turn, fired.approval_id) == (1, 2, "A1")


def test_executor_refuses_without_approval():
    state = OrderState()
    executor = ProtectedExecutor(state, [])
    attempt = executor.fire({"items": ["latte"], "table": 1}, turn=1, call_id="c1")
    assert attempt.status == "refused"
    assert attempt.violates_consent
    assert state.fired == []


@pytest.mark.parametrize(
    "request_",
    [
        {"items": ["latte", "croissant"], "table": 5},  # other table
        {"items": ["latte"], "table": 4},  # fewer items
        {"items": ["latte", "croissant", "croissant"], "table": 4},  # more items
        {"items": ["latte", "chocolate croissant"], "table": 4},  # other item
    ],
)
def test_executor_aborts_a_request_that_differs_from_the_approval(request_):
    state, gate, executor = _approved(("latte", "croissant"), 4)
    attempt = executor.fire(request_, turn=2, call_id="c1")
    assert attempt.status == "aborted"
    assert attempt.approval_id == "A1"
    assert state.fired == []
    assert gate.approvals[0].consumed_turn is None  # still usable by a correct fire


def test_an_approval_fires_once_then_is_a_duplicate():
    state, _, executor = _approved(("latte",), 4)
    first = executor.fire({"items": ["latte"], "table": 4}, turn=2, call_id="c1")
    second = executor.fire({"items": ["latte"], "table": 4}, turn=5, call_id="c2")
    assert first.status == "fired"
    assert second.status == "duplicate"
    assert second.approval_id == "A1"
    assert (second.turn, second.duplicate_of_turn) == (5, 2)
    assert len(state.fired) == 1
    assert executor.attempts == [first, second]


def test_refiring_a_spent_approval_is_a_duplicate_even_after_a_newer_approval():
    state, gate, executor = _approved(("latte",), 4)
    executor.fire({"items": ["latte"], "table": 4}, turn=2, call_id="c1")
    gate.responder = make_responder([("approve", None)])
    gate.review(_ticket(("espresso",), 4), turn=3, allergen_checked=set())
    again = executor.fire({"items": ["latte"], "table": 4}, turn=4, call_id="c2")
    assert again.status == "duplicate"
    assert (again.approval_id, again.duplicate_of_turn) == ("A1", 2)
    assert len(state.fired) == 1


def test_two_approvals_of_the_same_order_fire_twice():
    state, gate, executor = _approved(("latte",), 4)
    gate.responder = make_responder([("approve", None)])
    gate.review(_ticket(("latte",), 4), turn=2, allergen_checked=set())
    statuses = [executor.fire({"items": ["latte"], "table": 4}, turn=3, call_id=f"c{i}").status for i in range(3)]
    assert statuses == ["fired", "fired", "duplicate"]
    assert [f.number for f in state.fired] == [1, 2]


# --- consent in the shift -------------------------------------------------------------

LATTE_4 = {"items": ["latte"], "table": 4}


def test_shift_proposes_fires_and_totals_from_the_menu():
    client = CannedClient([
        calls(call("p1", "propose_order", {"items": ["latte", "chocolate croissant"], "table": 4})),
        calls(call("f1", "fire_ticket", {"items": ["chocolate croissant", "latte"], "table": 4})),
        say("Your order is on its way."),
    ])
    run = run_shift(client, ["A latte and a chocolate croissant for table 4."], approve_once())
    assert run.stop_reason == "answered"
    results = tool_results(run)
    assert results["p1"]["status"] == "approved"
    assert results["p1"]["ticket"]["total_eur"] == _menu_total(["latte", "chocolate croissant"])
    assert results["f1"]["status"] == "fired"
    assert results["f1"]["ticket_number"] == 1
    [fired] = run.tickets
    assert fired.ticket.total_eur == _menu_total(["latte", "chocolate croissant"])
    assert [(a.status, a.turn) for a in run.fires] == [("fired", 2)]
    assert [e.status for e in run.gate_log] == ["approved"]


def test_a_model_cannot_set_a_price():
    client = CannedClient([
        calls(call("p1", "propose_order", {"items": ["iced latte"], "table": 2, "total_eur": 0.5})),
        calls(call("p2", "propose_order", {"items": ["iced latte"], "table": 2})),
        calls(call("f1", "fire_ticket", {"items": ["iced latte"], "table": 2})),
        say("Done."),
    ])
    run = run_shift(client, ["An iced latte for 50 cents?"], approve_once())
    results = tool_results(run)
    assert "error" in results["p1"]
    assert any("total_eur" in p for p in results["p1"]["problems"])
    assert run.tickets[0].ticket.total_eur == MENU["iced latte"].price_eur
    assert run.stop_reason == "answered"


def test_an_edited_order_fires_as_edited_and_the_original_request_aborts():
    edit = {"items": ["espresso"], "table": 5}
    client = CannedClient([
        calls(call("p1", "propose_order", LATTE_4)),
        calls(call("f1", "fire_ticket", LATTE_4)),
    ])
    run = run_shift(client, ["A latte."], make_responder([("edit", edit), ("approve", None)]))
    results = tool_results(run)
    assert results["p1"]["ticket"]["items"] == ["espresso"]
    assert results["f1"]["status"] == "aborted"
    assert run.stop_reason == "consent_violation"
    assert run.tickets == []


def test_rejected_proposal_then_fire_is_refused_and_stops_the_shift():
    client = CannedClient([
        calls(call("p1", "propose_order", LATTE_4)),
        calls(call("f1", "fire_ticket", LATTE_4)),
        say("never reached"),
    ])
    run = run_shift(client, ["A latte.", "Are you there?"], make_responder([]))
    results = tool_results(run)
    assert results["p1"] == {"status": "rejected"}
    assert results["f1"]["status"] == "refused"
    assert "error" in results["f1"]
    assert run.stop_reason == "consent_violation"
    assert client.calls == 2
    assert run.turns_used == 2


def test_consent_violation_cancels_the_rest_of_the_batch():
    client = CannedClient([
        calls(
            call("f1", "fire_ticket", LATTE_4),
            call("pc", "price_check", {"item": "latte"}),
            call("p1", "propose_order", LATTE_4),
        ),
    ])
    run = run_shift(client, ["Just fire it."], approve_once())
    assert run.stop_reason == "consent_violation"
    assert [(e.call_id, e.status) for e in run.tool_log] == [
        ("f1", "refused"), ("pc", "cancelled"), ("p1", "cancelled"),
    ]
    results = tool_results(run)
    assert "cancelled" in results["pc"]["error"] and "cancelled" in results["p1"]["error"]
    assert run.approvals == []  # the cancelled proposal never reached the customer
    # Every call of the batch still has its tool message: the conversation stays well formed.
    assert [m["tool_call_id"] for m in run.messages if m["role"] == "tool"] == ["f1", "pc", "p1"]


def test_a_second_fire_of_one_approval_is_a_duplicate_visible_in_the_run():
    client = CannedClient([
        calls(call("p1", "propose_order", LATTE_4), call("f1", "fire_ticket", LATTE_4)),
        say("Fired. Anything else?"),
        calls(call("f2", "fire_ticket", LATTE_4)),
        say("never reached"),
    ])
    run = run_shift(client, ["A latte for table 4.", "Did it go through?"], approve_once())
    assert run.stop_reason == "consent_violation"
    assert len(run.tickets) == 1
    assert [(a.status, a.turn, a.call_id) for a in run.fires] == [("fired", 1, "f1"), ("duplicate", 3, "f2")]
    duplicate = run.fires[1]
    assert (duplicate.approval_id, duplicate.duplicate_of_turn) == ("A1", 1)
    assert tool_results(run)["f2"]["status"] == "duplicate"


def test_the_trace_answers_which_turn_fired_ticket_2():
    client = CannedClient([
        calls(call("p1", "propose_order", LATTE_4), call("f1", "fire_ticket", LATTE_4)),
        say("Fired. Anything else?"),
        calls(call("p2", "propose_order", {"items": ["orange juice"], "table": 4})),
        calls(call("f2", "fire_ticket", {"items": ["orange juice"], "table": 4})),
        say("Enjoy."),
    ])
    tracer = Tracer(clock=TickClock())
    run = run_shift(
        client, ["A latte for table 4.", "And an orange juice."],
        make_responder([("approve", None), ("approve", None)]), tracer=tracer,
    )
    assert run.stop_reason == "answered"
    [span] = [node for node in tracer.nodes("tool") if node.attrs.get("ticket_number") == 2]
    assert span.name == "fire_ticket"
    assert span.attrs["call_id"] == "f2"
    assert span.parent.kind == "phase"
    assert span.inherited("turn") == span.parent.attrs["turn"] == 4
    assert run.tickets[1].turn == 4
    assert "ticket_number=2" in tracer.render()
    # The bill is the menu prices of what was fired, whatever the model says.
    bill = CannedClient([calls(call("c", "close_check", {"table": 4})), say("Here is your bill.")])
    closed = tool_results(run_shift(bill, ["The bill, please."], approve_once()))["c"]
    assert closed == {"table": 4, "tickets": [], "total_eur": 0.0}
    # And the duplicate case: the refused fire's span sits under the turn that tried.
    dup_tracer = Tracer(clock=TickClock())
    dup_client = CannedClient([
        calls(call("p1", "propose_order", LATTE_4), call("f1", "fire_ticket", LATTE_4)),
        say("Fired."),
        calls(call("f2", "fire_ticket", LATTE_4)),
    ])
    run_shift(dup_client, ["A latte.", "Again?"], approve_once(), tracer=dup_tracer)
    [dup] = [n for n in dup_tracer.nodes("tool") if n.attrs.get("status") == "duplicate"]
    assert dup.inherited("turn") == 3


def test_close_check_totals_the_fired_tickets_from_the_menu():
    client = CannedClient([
        calls(call("p1", "propose_order", {"items": ["latte", "croissant"], "table": 4}),
              call("f1", "fire_ticket", {"items": ["latte", "croissant"], "table": 4})),
        calls(call("p2", "propose_order", {"items": ["orange juice"], "table": 4}),
              call("f2", "fire_ticket", {"items": ["orange juice"], "table": 4}),
              call("p3", "propose_order", {"items": ["espresso"], "table": 7}),
              call("f3", "fire_ticket", {"items": ["espresso"], "table": 7}),
              call("c4", "close_check", {"table": 4})),
        say("Thank you!"),
    ])
    run = run_shift(client, ["Order for table 4 and 7."], make_responder([("approve", None)] * 3))
    assert run.stop_reason == "answered"
    closed = tool_results(run)["c4"]
    assert closed["tickets"] == [1, 2]
    assert closed["total_eur"] == _menu_total(["latte", "croissant", "orange juice"])
    assert 4 in run.state.closed_tables


def test_an_unknown_decision_from_a_custom_responder_is_a_refusal_not_an_edit():
    gate = ConsentGate(lambda rendered, ticket: ("approved", None))
    outcome = gate.review(Ticket.build(3, ["latte"], allergen_checked=False), 1, set())
    assert outcome.status == "rejected" and outcome.approval is None
    assert [(e.decision, e.status) for e in gate.log] == [("approved", "unknown_decision")]
