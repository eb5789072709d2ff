"""The shift's closed vocabularies: why a shift stopped, what a tool call came to, what the
customer said at the consent gate.

They are `StrEnum`s, so a member compares and hashes equal to its string value: existing
code that writes `run.stop_reason == "answered"` keeps working, while code that names a
member (`StopReason.ANSWERED`) fails a type check or an import the day the member is
renamed, instead of silently emitting a stale string.
"""

from __future__ import annotations

from enum import StrEnum


class StopReason(StrEnum):
    ANSWERED = "answered"
    SCRIPT_DONE = "script_done"
    TURN_CAP = "turn_cap"
    CONSENT_VIOLATION = "consent_violation"
    RETRIES_EXHAUSTED = "retries_exhausted"


class ToolStatus(StrEnum):
    OK = "ok"
    INVALID = "invalid"  # the arguments failed validation (counts against the repair budget)
    APPROVED = "approved"
    REJECTED = "rejected"
    ROUNDS_EXHAUSTED = "rounds_exhausted"
    FIRED = "fired"
    REFUSED = "refused"
    ABORTED = "aborted"
    DUPLICATE = "duplicate"
    CANCELLED = "cancelled"  # an earlier call in the same batch ended the shift

    @property
    def failed(self) -> bool:
        """The call did not do what was asked: a consent refusal, abort or duplicate, invalid
        arguments, or a call cancelled by an earlier one. A rejected proposal is the
        customer's answer, not a failure."""
        return self in _FAILED


_FAILED = frozenset({ToolStatus.INVALID, ToolStatus.REFUSED, ToolStatus.ABORTED,
                     ToolStatus.DUPLICATE, ToolStatus.CANCELLED})


class ConsentDecision(StrEnum):
    """What a responder may answer to a proposal."""

    APPROVE = "approve"
    REJECT = "reject"
    EDIT = "edit"


class ConsentOutcome(StrEnum):
    """What one round at the consent gate came to."""

    APPROVED = "approved"
    REJECTED = "rejected"
    EDITED = "edited"
    EDIT_INVALID = "edit_invalid"
    UNKNOWN_DECISION = "unknown_decision"  # a responder answer that is none of the three: a no
