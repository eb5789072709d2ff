"""The protected executor: the only way a ticket reaches the kitchen.

It fires the approved payload, never the model's request. No approval means refused; a
request whose table or items differ from the approval is aborted; and an approval is
consumed by its fire, so a second fire of it is refused as a duplicate: one approval charges
the customer once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cafe.counter.consent import Approval
from cafe.counter.orders import FiredTicket, OrderState
from cafe.trace.outcomes import ToolStatus

# Module-level names for the fire outcomes, kept importable: they are ToolStatus's members.
FIRED, REFUSED, ABORTED, DUPLICATE = ToolStatus.FIRED, ToolStatus.REFUSED, ToolStatus.ABORTED, ToolStatus.DUPLICATE


@dataclass
class FireAttempt:
    turn: int
    call_id: str
    status: ToolStatus
    approval_id: str | None = None
    ticket_number: int | None = None
    duplicate_of_turn: int | None = None

    @property
    def violates_consent(self) -> bool:
        return self.status != FIRED


def _same_order(request: dict[str, Any], approval: Approval) -> bool:
    return request.get("table") == approval.ticket.table and sorted(
        request.get("items", [])
    ) == sorted(approval.ticket.items)


class ProtectedExecutor:
    def __init__(self, state: OrderState, approvals: list[Approval]) -> None:
        self._state = state
        self._approvals = approvals
        self.attempts: list[FireAttempt] = []

    def fire(self, request: dict[str, Any], *, turn: int, call_id: str) -> FireAttempt:
        attempt = self._decide(request, turn, call_id)
        self.attempts.append(attempt)
        return attempt

    def _decide(self, request: dict[str, Any], turn: int, call_id: str) -> FireAttempt:
        open_approvals = [a for a in self._approvals if a.consumed_turn is None]
        approval = open_approvals[-1] if open_approvals else None
        if approval is None or not _same_order(request, approval):
            # A re-fire of a spent approval is a duplicate, even when a newer approval is open.
            spent = [a for a in self._approvals if a.consumed_turn is not None and _same_order(request, a)]
            if spent:
                return FireAttempt(
                    turn, call_id, DUPLICATE, spent[-1].approval_id,
                    duplicate_of_turn=spent[-1].consumed_turn,
                )
            if approval is None:
                return FireAttempt(turn, call_id, REFUSED)
            return FireAttempt(turn, call_id, ABORTED, approval.approval_id)
        approval.consumed_turn = turn
        number = self._state.next_ticket_number()
        self._state.fired.append(FiredTicket(number, approval.ticket, approval.approval_id, turn))
        return FireAttempt(turn, call_id, FIRED, approval.approval_id, ticket_number=number)
