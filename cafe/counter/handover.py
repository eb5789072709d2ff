"""The end-of-shift handover note. Its timestamp and its closing flourish change from
shift to shift, so both are drawn from inputs: a clock and a random generator. With a
fixed clock and a fresh seeded `random.Random`, the note is the same on every replay."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Protocol, TypeVar

from cafe.counter.loop import ShiftRun

FLOURISHES = (
    "Milk jug rinsed, grinder dialled in. Over to you.",
    "The croissants are counted and the till is honest.",
    "All tickets accounted for; may your queue be short.",
    "Espresso machine purged. Have a calm one.",
    "Tables wiped, allergens checked, nobody charged twice.",
    "The pastry case is yours now. Guard it well.",
    "Orders out, consent respected. Good luck out there.",
    "Oat milk restocked. The rest is up to you.",
)


T = TypeVar("T")


class Chooser(Protocol):
    """A `random.Random`, or anything that chooses like one."""

    def choice(self, seq: Sequence[T]) -> T: ...


def handover_note(run: ShiftRun, *, clock: Callable[[], float], rng: Chooser) -> str:
    stamp = datetime.fromtimestamp(clock(), tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    lines = [
        f"Shift handover, {stamp}",
        f"conversation {run.conversation_id}: ended {run.stop_reason} after "
        f"{run.turns_used} turn(s), {run.model_calls} model call(s)",
    ]
    for fired in run.tickets:
        lines.append(
            f"ticket {fired.number} (turn {fired.turn}, approval {fired.approval_id}): table "
            f"{fired.ticket.table}, {len(fired.ticket.items)} item(s), EUR {fired.ticket.total_eur:.2f}"
        )
    refused = [attempt for attempt in run.fires if attempt.violates_consent]
    for attempt in refused:
        lines.append(f"fire {attempt.status} at turn {attempt.turn} ({attempt.call_id})")
    if not run.tickets and not refused:
        lines.append("no tickets fired")
    lines.append(rng.choice(FLOURISHES))
    return "\n".join(lines)
