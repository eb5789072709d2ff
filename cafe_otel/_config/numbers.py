"""Numbers as a setting may write them: ASCII digits only.

Python's `int()` and `float()` also take other scripts' digits (`"١٠٠"`, full-width
`"１"`), underscores (`"1_000"`) and words (`"inf"`, `"nan"`); no other reader of the same
variable (the Collector, another SDK) does, so a value one of them would refuse is refused
here too, rather than read as something its writer cannot see.
"""

from __future__ import annotations

import re

_WHOLE = re.compile(r"[+-]?[0-9]+", re.ASCII)
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
MAX_DIGITS = 30  # int() of thousands of digits is slow or refused; no setting needs more


def ascii_whole(text: str) -> int | None:
    """`text` (spaces around allowed) as a whole number written in ASCII digits, else None."""
    stripped = text.strip()
    if len(stripped) > MAX_DIGITS or not _WHOLE.fullmatch(stripped):
        return None
    return int(stripped)


def ascii_decimal(text: str) -> float | None:
    """`text` (spaces around allowed) as a decimal number written in ASCII, else None
    (no `inf`, `nan`, underscores or other digits)."""
    stripped = text.strip()
    if len(stripped) > MAX_DIGITS or not _DECIMAL.fullmatch(stripped):
        return None
    return float(stripped)
