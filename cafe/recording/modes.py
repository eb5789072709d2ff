"""Record modes, as in VCR.py: what to do when a recording is asked for.

- `once`: record when no recording exists, never overwrite one (the default);
- `all`: always record, replacing what is there;
- `none`: never record (replay only; a missing recording is an error).
"""

from __future__ import annotations

from enum import StrEnum

from cafe.recording.errors import RecordingError


class UnknownRecordMode(RecordingError, ValueError):
    """A record mode that is not once, all or none (still a ValueError, as it always was)."""


class RecordMode(StrEnum):
    ONCE = "once"
    ALL = "all"
    NONE = "none"

    @classmethod
    def parse(cls, value: str | RecordMode) -> RecordMode:
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(mode.value for mode in cls)
            shown = repr(value) if isinstance(value, str) and len(value) <= 20 else type(value).__name__
            raise UnknownRecordMode(f"unknown record mode {shown}; use one of {choices}") from None
