"""Whether a value about to leave the process holds a secret.

A value may be of its key's shape and still be a secret: a server chooses its response ids,
model names, finish reasons and fingerprints, and `sk-proj-...`, `ghp_...` or `AKIA...` fit
an identifier's shape. So every string that leaves (an attribute's value or each string of
an array, a span or event name, a scope's name and version, a resource attribute) is looked
at twice: for the secrets we were given (a live client's API key, as substrings), and with
the secret patterns a recording is scrubbed with (`cafe.privacy`: the default families, and
`CAFE_SCRUB_PATTERNS` when the caller passes a scrubber made with them).

This runs on every exported attribute, so most values are answered by the patterns' keyword
pre-scan (`Scrubber.may_need_scrubbing`): only a text holding one of their keywords is
scrubbed to decide. Texts found clean are remembered (a bounded set), since names, models
and the service's own values repeat from span to span.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cafe.privacy import MIN_SECRET_CHARS, Scrubber, structure_scrubber

_MEMO_SIZE = 4096  # texts remembered as clean, emptied when full


class SecretCheck:
    """`check(value)`: True when `value` (a string, or a tuple or list of them) holds a known
    secret or a text the secret patterns find. Other values (numbers, booleans) hold none."""

    def __init__(self, patterns: Scrubber | None = None, known: Iterable[str] = ()) -> None:
        self._patterns = structure_scrubber() if patterns is None else patterns
        self._known: tuple[str, ...] = ()
        self._clean: set[str] = set()
        self.add_known(known)

    @property
    def known(self) -> tuple[str, ...]:
        return self._known

    def add_known(self, secrets: Iterable[str]) -> bool:
        """More values to look for; True when one was new (what was clean before may not be).
        Shorter ones than MIN_SECRET_CHARS are not looked for: a local server's placeholder
        key ("x", "EMPTY") would otherwise withhold every value that happens to contain it."""
        new = tuple(dict.fromkeys(s for s in secrets
                                  if isinstance(s, str) and len(s) >= MIN_SECRET_CHARS and s not in self._known))
        if not new:
            return False
        self._known += new
        self._clean = set()
        return True

    def __call__(self, value: Any) -> bool:
        kind = type(value)
        if kind is str:
            return self.text(value)
        if kind is tuple or kind is list:
            return any(type(item) is str and self.text(item) for item in value)
        return False

    def text(self, text: str) -> bool:
        """Whether one text holds a secret."""
        clean = self._clean
        if text in clean:
            return False
        for secret in self._known:
            if secret in text:
                return True
        patterns = self._patterns
        if patterns.may_need_scrubbing(text) and patterns.scrub(text) != text:
            return True
        if len(clean) >= _MEMO_SIZE:
            clean.clear()
        clean.add(text)
        return False
