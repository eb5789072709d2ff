"""Running one tool call: validate, then price, allergens, proposal, fire or close.

Bad input never crashes the shift: an unknown tool, arguments that are not JSON, or
arguments that break the schema or the menu come back to the model as an error result,
and count against the shift's repair budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cafe.counter import tools as t
from cafe.counter.consent import ConsentGate
from cafe.counter.executor import FIRED, ProtectedExecutor
from cafe.counter.menu import ALTERNATIVES, EIGHTY_SIXED, MENU, cents_to_eur
from cafe.counter.orders import OrderState, Ticket
from cafe.counter.repair import RepairBudget, feedback
from cafe.counter.tool_arguments import check_arguments
from cafe.trace.outcomes import StopReason, ToolStatus

OK, INVALID = ToolStatus.OK, ToolStatus.INVALID  # module-level names for ToolStatus's members


@dataclass
class ToolOutcome:
    result: dict[str, Any]
    status: ToolStatus
    # Set when this call must end the shift: consent_violation or retries_exhausted.
    stop_reason: StopReason | None = None
    ticket_number: int | None = None


class ToolDispatcher:
    def __init__(
        self,
        state: OrderState,
        gate: ConsentGate,
        executor: ProtectedExecutor,
        budget: RepairBudget,
    ) -> None:
        self.state = state
        self.gate = gate
        self.executor = executor
        self.budget = budget

    def run(self, name: str, raw_arguments: str | None, *, turn: int, call_id: str) -> ToolOutcome:
        checked = check_arguments(name, raw_arguments)
        if not checked.ok:
            may_retry = self.budget.spend()
            return ToolOutcome(
                feedback(checked, self.budget),
                INVALID,
                stop_reason=None if may_retry else StopReason.RETRIES_EXHAUSTED,
            )
        arguments = checked.arguments
        if name == t.PRICE_CHECK:
            return ToolOutcome(self._price(arguments["item"]), OK)
        if name == t.CHECK_ALLERGENS:
            return ToolOutcome(self._allergens(arguments["item"], arguments["allergen"]), OK)
        if name == t.PROPOSE_ORDER:
            return self._propose(arguments, turn)
        if name == t.FIRE_TICKET:
            return self._fire(arguments, turn, call_id)
        return ToolOutcome(self._close(arguments["table"]), OK)

    def _price(self, item: str) -> dict[str, Any]:
        result: dict[str, Any] = {
            "item": item,
            "price_eur": MENU[item].price_eur,
            "available": item not in EIGHTY_SIXED,
        }
        if item in EIGHTY_SIXED:
            result["alternative"] = ALTERNATIVES.get(item)
        return result

    def _allergens(self, item: str, allergen: str) -> dict[str, Any]:
        self.state.allergens_checked.add(item)
        listed = MENU[item].allergens
        return {
            "item": item,
            "allergen": allergen,
            "contains": allergen.strip().lower() in listed,
            "allergens": list(listed),
        }

    def _propose(self, arguments: dict[str, Any], turn: int) -> ToolOutcome:
        items = list(arguments["items"])
        ticket = Ticket.build(
            arguments["table"],
            items,
            allergen_checked=all(item in self.state.allergens_checked for item in items),
        )
        outcome = self.gate.review(ticket, turn, self.state.allergens_checked)
        if outcome.approval is None:
            return ToolOutcome({"status": outcome.status}, outcome.status)
        return ToolOutcome(
            {
                "status": ToolStatus.APPROVED,
                "approval_id": outcome.approval.approval_id,
                "ticket": outcome.approval.ticket.as_dict(),
            },
            ToolStatus.APPROVED,
        )

    def _fire(self, arguments: dict[str, Any], turn: int, call_id: str) -> ToolOutcome:
        attempt = self.executor.fire(arguments, turn=turn, call_id=call_id)
        if attempt.status == FIRED:
            fired = self.state.fired[-1]
            return ToolOutcome(
                {"status": FIRED, "ticket_number": fired.number, "ticket": fired.ticket.as_dict()},
                FIRED,
                ticket_number=fired.number,
            )
        reasons = {
            ToolStatus.REFUSED: "no approved order to fire",
            ToolStatus.ABORTED: "the request differs from the approved order (table or items)",
            ToolStatus.DUPLICATE: "this approval was already fired; a second fire is refused",
        }
        return ToolOutcome(
            {"error": f"fire {attempt.status}: {reasons[attempt.status]}", "status": attempt.status},
            attempt.status,
            stop_reason=StopReason.CONSENT_VIOLATION,
        )

    def _close(self, table: int) -> dict[str, Any]:
        mine = [f for f in self.state.fired if f.ticket.table == table]
        self.state.closed_tables.add(table)
        return {
            "table": table,
            "tickets": [f.number for f in mine],
            "total_eur": cents_to_eur(round(sum(f.ticket.total_eur * 100 for f in mine))),
        }
