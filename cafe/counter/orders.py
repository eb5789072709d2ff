"""Tickets and the order state of one shift."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from cafe.counter.menu import cents_to_eur, total_cents


@dataclass(frozen=True)
class Ticket:
    table: int
    items: tuple[str, ...]
    total_eur: float
    allergen_checked: bool = False

    @classmethod
    def build(cls, table: int, items: list[str], *, allergen_checked: bool) -> Ticket:
        # The total is always recomputed from the menu, never taken from the model.
        return cls(
            table=table,
            items=tuple(items),
            total_eur=cents_to_eur(total_cents(items)),
            allergen_checked=allergen_checked,
        )

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["items"] = list(self.items)
        return data

    def render(self) -> str:
        lines = [f"Table {self.table}"]
        lines += [f"  - {item}" for item in self.items]
        lines.append(f"  total EUR {self.total_eur:.2f}")
        return "\n".join(lines)


@dataclass
class FiredTicket:
    number: int
    ticket: Ticket
    approval_id: str
    turn: int


@dataclass
class ToolLogEntry:
    turn: int
    call_id: str
    tool: str
    status: str


@dataclass
class OrderState:
    fired: list[FiredTicket] = field(default_factory=list)
    tool_log: list[ToolLogEntry] = field(default_factory=list)
    allergens_checked: set[str] = field(default_factory=set)
    closed_tables: set[int] = field(default_factory=set)

    def next_ticket_number(self) -> int:
        return len(self.fired) + 1
