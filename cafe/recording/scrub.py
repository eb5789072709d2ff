"""Secrets scrubbing, applied to the final text of every line before it is written.

Scrubbing the serialised line (rather than chosen fields) is what makes it hold on every
write path: nothing reaches the file without passing through `Scrubber.scrub`.

A keyed secret (`"Authorization": "..."`, `"api_key": "..."`) is caught in three forms:
as a JSON key of the line itself, as an escaped key inside a JSON string (tool-call
arguments are JSON inside a string: `{\\"api_key\\": \\"...\\"}`), and as an HTTP-style
`Authorization: Basic ...` in free text. Extra patterns come from the caller or from the
`CAFE_SCRUB_PATTERNS` environment variable (one regular expression per line).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cafe.recording.errors import RecordingError

REDACTED = "[REDACTED]"
ENV_PATTERNS = "CAFE_SCRUB_PATTERNS"

_STRING_VALUE = r'"([^"\\]*(?:\\.[^"\\]*)*)"'  # a JSON string's body
_ESCAPED_VALUE = r'\\+"((?:[^"\\]|\\(?!\\*"))*)\\+"'  # a string's body inside a JSON string
_TEXT_VALUE = r"((?:[A-Za-z][\w-]*[ \t]+)?[^\s\"'\\,;&}]{4,})"  # `Scheme token` or `token`


def _keyed(kind: str, key: str) -> list[tuple[str, str]]:
    return [
        (kind, rf'(?i)"{key}"\s*:\s*{_STRING_VALUE}'),
        (kind, rf'(?i)\\+"{key}\\+"\s*:\s*{_ESCAPED_VALUE}'),
        (kind, rf"(?i)(?<![\w-]){key}\s*[:=]\s*{_TEXT_VALUE}"),
    ]


# (name, pattern). A pattern with a group replaces only the group, keeping JSON keys.
DEFAULT_SECRET_PATTERNS: tuple[tuple[str, str], ...] = (
    *_keyed("authorization header", r"(?:proxy-)?authorization"),
    *_keyed("api-key field", r"(?:x-)?api[_-]?key"),
    *_keyed("credential field", r"(?:password|passwd|client[_-]secret|secret[_-]key|access[_-]token"
                                r"|refresh[_-]token)"),
    ("openai-style key", r"\bsk-[A-Za-z0-9_\-]{12,}"),
    ("bearer token", r"(?i)\bbearer\s+([A-Za-z0-9._~+/=\-]{8,})"),
    ("aws access key", r"\bAKIA[0-9A-Z]{16}\b"),
    ("github token", r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"),
    ("private key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----(?:(?!-----END).)*(?:-----END [A-Z ]*PRIVATE KEY-----)?"),
)


@dataclass(frozen=True)
class Finding:
    line: int
    kind: str
    column: int


def _compile(name: str, pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.DOTALL) if name == "private key" else re.compile(pattern)
    except re.error as error:
        raise RecordingError(f"scrub pattern ({name}) is not a valid regular expression: {error.msg}") from None


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
        self._patterns = _literal_patterns(literals) + [
            (name, _compile(name, pattern)) for name, pattern in named
        ]

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None, **options) -> Scrubber:
        """The default patterns plus any in `CAFE_SCRUB_PATTERNS` (one per line)."""
        environ = os.environ if environ is None else environ
        extra = [line for line in environ.get(ENV_PATTERNS, "").splitlines() if line.strip()]
        return cls(extra_patterns=[*extra, *options.pop("extra_patterns", ())], **options)

    def with_literals(self, literals: Iterable[str]) -> Scrubber:
        clone = Scrubber(patterns=())
        clone._patterns = _literal_patterns(literals) + self._patterns
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


def _literal_patterns(literals: Iterable[str]) -> list[tuple[str, re.Pattern[str]]]:
    """A literal as it appears in a serialised line: raw, JSON-escaped, ASCII-escaped, and
    escaped twice (inside a JSON string such as tool-call arguments)."""
    forms: list[str] = []
    for secret in literals:
        if not secret:
            continue
        once = json.dumps(secret, ensure_ascii=False)[1:-1]
        for form in (secret, once, json.dumps(secret)[1:-1], json.dumps(once, ensure_ascii=False)[1:-1]):
            if form not in forms:
                forms.append(form)
    forms.sort(key=len, reverse=True)
    return [("known secret", re.compile(re.escape(form))) for form in forms]


def _replace(match: re.Match[str]) -> str:
    if match.lastindex:
        start, end = match.span(1)
        if match.group(1) in ("", REDACTED):
            return match.group(0)
        offset = match.start()
        whole = match.group(0)
        return whole[: start - offset] + REDACTED + whole[end - offset :]
    return REDACTED
