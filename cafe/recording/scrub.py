"""Secrets scrubbing, applied to the final text of every line before it is written.

Scrubbing the serialised line (rather than chosen fields) is what makes it hold on every
write path: nothing reaches the file without passing through `Scrubber.scrub`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

REDACTED = "[REDACTED]"

# (name, pattern). A pattern with a group replaces only the group, keeping JSON keys.
DEFAULT_SECRET_PATTERNS: tuple[tuple[str, str], ...] = (
    ("openai-style key", r"\bsk-[A-Za-z0-9_\-]{12,}"),
    ("bearer token", r"(?i)\bbearer\s+([A-Za-z0-9._~+/=\-]{8,})"),
    ("authorization header", r'(?i)"(?:proxy-)?authorization"\s*:\s*"([^"\\]*(?:\\.[^"\\]*)*)"'),
    ("api-key field", r'(?i)"(?:x-)?api[_-]?key"\s*:\s*"([^"\\]*(?:\\.[^"\\]*)*)"'),
    ("aws access key", r"\bAKIA[0-9A-Z]{16}\b"),
    ("github token", r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"),
)


@dataclass(frozen=True)
class Finding:
    line: int
    kind: str
    column: int


class Scrubber:
    def __init__(
        self,
        patterns: Iterable[tuple[str, str]] = DEFAULT_SECRET_PATTERNS,
        *,
        extra_patterns: Iterable[str] = (),
        literals: Iterable[str] = (),
    ) -> None:
        named = [*patterns, *(("configured pattern", p) for p in extra_patterns)]
        # Exact secret values (a live client's key) are matched first and in any context.
        named = [("known secret", re.escape(s)) for s in literals if s] + named
        self._patterns = [(name, re.compile(pattern)) for name, pattern in named]

    def with_literals(self, literals: Iterable[str]) -> Scrubber:
        clone = Scrubber(patterns=())
        clone._patterns = [("known secret", re.compile(re.escape(s))) for s in literals if s]
        clone._patterns += self._patterns
        return clone

    def scrub(self, text: str) -> str:
        for _, pattern in self._patterns:
            text = pattern.sub(_replace, text)
        return text

    def findings(self, text: str, line: int = 1) -> list[Finding]:
        return [
            Finding(line, name, match.start() + 1)
            for name, pattern in self._patterns
            for match in pattern.finditer(text)
            if _replace(match) != match.group(0)
        ]


def _replace(match: re.Match[str]) -> str:
    if match.lastindex:
        start, end = match.span(1)
        if match.group(1) in ("", REDACTED):
            return match.group(0)
        offset = match.start()
        whole = match.group(0)
        return whole[: start - offset] + REDACTED + whole[end - offset :]
    return REDACTED
