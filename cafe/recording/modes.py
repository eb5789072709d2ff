"""Record modes, as in VCR.py: what to do when a recording is asked for.

- `once`: record when no recording exists, never overwrite one (the default);
- `all`: always record, replacing what is there;
- `none`: never record (replay only; a missing recording is an error).
"""

from __future__ import annotations

from enum import StrEnum


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
            raise ValueError(f"unknown record mode {value!r}; use one of {choices}") from None
