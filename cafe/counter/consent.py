"""The consent gate: a proposal is validated, shown to the customer, and only an explicit
approval produces something the executor may fire.

`make_responder` plays a synthetic customer for offline shifts and replays: it pops the
decisions it was given in order and rejects once they run out, so each replay needs a
fresh responder with the same decisions.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from cafe.counter.orders import Ticket
from cafe.counter.tool_arguments import check_arguments
from cafe.counter.tools import PROPOSE_ORDER
from cafe.trace.outcomes import ConsentDecision, ConsentOutcome, ToolStatus

# Module-level names for the decisions: members of ConsentDecision (equal to their strings).
APPROVE, REJECT, EDIT = ConsentDecision.APPROVE, ConsentDecision.REJECT, ConsentDecision.EDIT
DECISIONS = frozenset(ConsentDecision)

Decision = tuple[str, Any]
Responder = Callable[[str, Ticket], Decision]


class SyntheticCustomer:
    """A responder that answers each proposal with the next of its decisions and rejects once
    they run out. It keeps the decisions it was given (`decisions`), so that a recording
    made with it says how to play the same customer again."""

    __slots__ = ("_queue", "decisions")

    def __init__(self, decisions: Iterable[Decision]) -> None:
        self.decisions: tuple[Decision, ...] = tuple((str(kind), payload) for kind, payload in decisions)
        for kind, _ in self.decisions:
            if kind not in DECISIONS:
                raise ValueError(f"unknown consent decision {kind!r}; use one of {sorted(DECISIONS)}")
        self._queue = deque(self.decisions)

    def __repr__(self) -> str:
        return f"SyntheticCustomer({len(self.decisions)} decision(s), {len(self._queue)} left)"

    def __call__(self, rendered: str, ticket: Ticket) -> Decision:
        return self._queue.popleft() if self._queue else (REJECT, None)


def make_responder(decisions: Iterable[Decision]) -> Responder:
    return SyntheticCustomer(decisions)


@dataclass
class Approval:
    approval_id: str
    ticket: Ticket
    turn: int
    consumed_turn: int | None = None


@dataclass
class GateEntry:
    turn: int
    round: int
    decision: str  # what the responder said (a ConsentDecision, or whatever else it answered)
    status: ConsentOutcome


@dataclass
class GateOutcome:
    status: ToolStatus  # APPROVED | REJECTED | ROUNDS_EXHAUSTED
    approval: Approval | None = None


@dataclass
class ConsentGate:
    responder: Responder
    max_rounds: int = 3
    approvals: list[Approval] = field(default_factory=list)
    log: list[GateEntry] = field(default_factory=list)

    def review(self, ticket: Ticket, turn: int, allergen_checked: set[str]) -> GateOutcome:
        for round_number in range(1, self.max_rounds + 1):
            decision, payload = self.responder(ticket.render(), ticket)
            if decision == APPROVE:
                approval = Approval(f"A{len(self.approvals) + 1}", ticket, turn)
                self.approvals.append(approval)
                self.log.append(GateEntry(turn, round_number, decision, ConsentOutcome.APPROVED))
                return GateOutcome(ToolStatus.APPROVED, approval)
            if decision == REJECT:
                self.log.append(GateEntry(turn, round_number, decision, ConsentOutcome.REJECTED))
                return GateOutcome(ToolStatus.REJECTED)
            if decision != EDIT:
                # A responder that answers something else has not consented: that is a no.
                self.log.append(GateEntry(turn, round_number, str(decision), ConsentOutcome.UNKNOWN_DECISION))
                return GateOutcome(ToolStatus.REJECTED)
            # An edit is re-validated exactly like a proposal and shown again.
            edited = check_arguments(PROPOSE_ORDER, json.dumps(payload))
            if edited.ok:
                items = list(edited.arguments["items"])
                ticket = Ticket.build(
                    edited.arguments["table"],
                    items,
                    allergen_checked=all(item in allergen_checked for item in items),
                )
                self.log.append(GateEntry(turn, round_number, decision, ConsentOutcome.EDITED))
            else:
                self.log.append(GateEntry(turn, round_number, decision, ConsentOutcome.EDIT_INVALID))
        return GateOutcome(ToolStatus.ROUNDS_EXHAUSTED)
