"""The bounded re-ask: invalid tool calls go back to the model with exact feedback,
at most `limit` times in a shift, after which the shift ends in a named state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cafe.counter.tool_arguments import CheckedArguments

PASSED = "passed"
RETRIES_EXHAUSTED = "retries_exhausted"


@dataclass
class RepairBudget:
    limit: int = 2
    used: int = 0

    def spend(self) -> bool:
        """Count one invalid call; True while the model may still be re-asked."""
        self.used += 1
        return self.used <= self.limit

    @property
    def state(self) -> str:
        return RETRIES_EXHAUSTED if self.used > self.limit else PASSED

    @property
    def left(self) -> int:
        return max(self.limit - self.used, 0)


def feedback(checked: CheckedArguments, budget: RepairBudget) -> dict[str, Any]:
    """The tool result the model sees for an invalid call: what failed, and how many
    more tries it has, so the re-ask is specific rather than 'try again'."""
    return {
        "error": f"invalid call to {checked.tool} ({checked.stage})",
        "problems": list(checked.problems),
        "retries_left": budget.left,
    }
