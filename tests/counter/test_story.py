"""The demo's model plays the whole counter job, and the harness keeps it honest."""

from __future__ import annotations

from cafe.counter import make_responder, run_shift
from cafe.counter.clients.story import StoryClient
from cafe.counter.demo import STORY_SCRIPT
from cafe.counter.executor import DUPLICATE, FIRED
from cafe.counter.tools import CHECK_ALLERGENS, FIRE_TICKET, PRICE_CHECK, PROPOSE_ORDER

LINES = list(STORY_SCRIPT)


def _tools_called(run) -> list[str]:
    return [entry.tool for entry in run.tool_log]


def test_allergy_question_then_order_is_checked_proposed_fired_once_and_the_retry_refused():
    run = run_shift(StoryClient(), LINES, make_responder([("approve", None)]))

    assert _tools_called(run) == [
        CHECK_ALLERGENS, CHECK_ALLERGENS, PRICE_CHECK, PRICE_CHECK, PROPOSE_ORDER, FIRE_TICKET, FIRE_TICKET,
    ]
    assert [attempt.status for attempt in run.fires] == [FIRED, DUPLICATE]
    assert run.fires[1].duplicate_of_turn == run.fires[0].turn
    (ticket,) = run.tickets
    assert (ticket.ticket.table, ticket.ticket.items) == (4, ("tomato toast", "latte"))
    assert ticket.ticket.allergen_checked is True  # both items were checked against egg
    assert ticket.ticket.total_eur == 4.0
    assert run.stop_reason == "consent_violation"


def test_the_allergen_answer_comes_from_the_menu_data():
    run = run_shift(StoryClient(), LINES[:1], make_responder([]))
    answer = run.messages[-1]["content"]
    assert answer == "The tomato toast has no egg (it does contain gluten)."
    assert run.stop_reason == "answered"


def test_without_the_retry_the_shift_ends_with_one_ticket_and_no_violation():
    run = run_shift(StoryClient(retry_fire=False), LINES, make_responder([("approve", None)]))
    assert [attempt.status for attempt in run.fires] == [FIRED]
    assert run.stop_reason == "answered"
    assert run.messages[-1]["content"] == "Ticket 1 is with the kitchen. Enjoy!"


def test_a_rejected_proposal_fires_nothing():
    run = run_shift(StoryClient(), LINES, make_responder([("reject", None)]))
    assert run.fires == [] and run.tickets == []
    assert "nothing has been sent" in run.messages[-1]["content"]
