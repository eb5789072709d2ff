"""The café's words on a page (`cafe.view.words`): a shift, its customer, the consent a
proposal got and the tickets it fired."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cafe.counter.tools import FIRE_TICKET, PROPOSE_ORDER
from cafe.recording.format import Recording
from cafe.view.words import Badge, PageWords


def _badges(name: str, result: Mapping[str, Any]) -> Sequence[Badge]:
    status = result.get("status")
    if name == PROPOSE_ORDER and isinstance(status, str):
        return (("", f"consent: {status}"),)
    ticket = result.get("ticket_number")
    if name == FIRE_TICKET and type(ticket) is int:
        return (("ticket", f"ticket {ticket}"),)
    return ()


SHIFT_WORDS = PageWords(run="shift", owner="customer", tool_badges=_badges, tally=("tickets fired", "ticket_number"))


def words(recording: Recording) -> PageWords | None:
    """The café's words for a recording of its shifts, None for any other."""
    return SHIFT_WORDS if recording.holds_shift_calls else None
