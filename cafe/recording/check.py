"""`cafe check-recording PATH...`: scan recordings for secrets and for text that looks like
real customer data, before anyone commits them.

A recording is a private artefact; the only ones that belong in a repository are
synthetic. This is a small, documented heuristic list, not a guarantee:

- secrets: every pattern of the `Scrubber` (API keys, authorization headers, bearer
  tokens, credential fields, private keys, `CAFE_SCRUB_PATTERNS`, `--pattern`);
- e-mail addresses, except at the reserved example domains (example.com/.net/.org and the
  .test, .example, .invalid and .localhost top-level domains);
- phone numbers: 9 to 15 digits with optional +, spaces, dots, dashes or brackets, except
  the fictional ranges (UK 07700 900000-900999, North American 555-0100-0199);
- payment card numbers: 13 to 19 digits that pass the Luhn check, except well-known
  test numbers (4242 4242 4242 4242 and the like);
- IBANs: a country code, two check digits and 11-30 letters or digits that pass the
  ISO 7064 mod-97 check.

Each finding names the file, the line, the kind and the JSON path of the string it was
found in (a key that is not a plain protocol word, or that holds a secret, by its size only),
never the value. Customer-data kinds are looked for in JSON string values only
(numbers such as timestamps are not text a customer typed); secrets in the whole line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cafe.jsondata import key_step
from cafe.privacy import Scrubber, structure_scrubber
from cafe.recording import format as _format
from cafe.recording.reader import open_for_reading

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@((?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,})\b")
_RESERVED_DOMAINS = ("example.com", "example.net", "example.org")
_RESERVED_TLDS = ("test", "example", "invalid", "localhost")
_PHONE = re.compile(r"(?<![\w.+/:-])(\+?\(?\d[\d ().-]{7,22}\d)(?![\w/:-]|\.\d)")
_FICTIONAL_PHONES = re.compile(r"(?:44|0)7700900\d{3}|1?\d{3}55501\d{2}")
_CARD = re.compile(r"(?<![\w.-])(\d(?:[ -]?\d){12,18})(?![\w-]|\.\d)")
_TEST_CARDS = frozenset({
    "4242424242424242", "4111111111111111", "4000056655665556", "5555555555554444",
    "5105105105105100", "378282246310005", "371449635398431", "6011111111111117",
    "3566002020360505", "4012888888881881",
})
_IBAN = re.compile(r"\b([A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30})\b")


@dataclass(frozen=True)
class CheckFinding:
    path: Path
    line: int
    kind: str
    where: str | None = None

    def __str__(self) -> str:
        at = f" (in {self.where})" if self.where else ""
        return f"{self.path}:{self.line}: {self.kind}{at}"


def luhn_ok(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def iban_ok(candidate: str) -> bool:
    compact = candidate.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(char, 36)) for char in moved)) % 97 == 1


def customer_data_kinds(text: str) -> list[str]:
    """The kinds of customer-like data in one piece of text, in a stable order."""
    kinds: list[str] = []
    for match in _EMAIL.finditer(text):
        domain = match.group(1).lower()
        reserved = domain.endswith(_RESERVED_DOMAINS) or domain.rsplit(".", 1)[-1] in _RESERVED_TLDS
        if not reserved:
            kinds.append("e-mail address")
            break
    cards: set[str] = set()
    for match in _CARD.finditer(text):
        digits = re.sub(r"\D", "", match.group(1))
        if luhn_ok(digits) and digits not in _TEST_CARDS:
            kinds.append("payment card number (passes Luhn)")
            cards.add(digits)
            break
    for match in _PHONE.finditer(text):
        digits = re.sub(r"\D", "", match.group(1))
        if 9 <= len(digits) <= 15 and digits not in cards and not _FICTIONAL_PHONES.fullmatch(digits):
            if len(digits) >= 13 and luhn_ok(digits):
                continue  # a card number, already judged above
            kinds.append("phone number")
            break
    for match in _IBAN.finditer(text):
        if iban_ok(match.group(1)):
            kinds.append("IBAN (passes mod-97)")
            break
    return kinds


def _step(key: str) -> str:
    """A key as a finding's path names it: a protocol key as it is; any other (customer text,
    a control character) or one holding a secret the default patterns find (a configured one
    may be broad enough to match `messages`) only by its size."""
    if structure_scrubber().scrub(key) != key:
        return f".<a key of {len(key)} characters>"
    return key_step(key)


_SSE_FIELDS = ("data:", "event:", "id:", "retry:", ":")


def _event_strings(text: str, path: str) -> Iterator[tuple[str, str]]:
    """A recorded server-sent-events chunk (`data: {...}`) holds JSON events: their string
    values are what the customer-data kinds look at (a JSON event's ids and timestamps are
    numbers, not phone numbers)."""
    from cafe.wire._exchange import sse_data

    for data in sse_data(text):
        try:
            event = json.loads(data)
        except (ValueError, RecursionError):
            yield path, data
            continue
        yield from _strings(event, f"{path}.data")


def _strings(value: Any, path: str = "$") -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        if value.startswith(_SSE_FIELDS):
            yield from _event_strings(value, path)
        else:
            yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, path + _step(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def check_file(path: Path | str, scrubber: Scrubber | None = None) -> list[CheckFinding]:
    """Scan one file; never modifies it. Lines that are not JSON are scanned as text."""
    path = Path(path)
    scrubber = scrubber or Scrubber.from_environment()
    findings: list[CheckFinding] = []
    seen: set[tuple[int, str, str | None]] = set()

    def add(line: int, kind: str, where: str | None) -> None:
        if (line, kind, where) not in seen:
            seen.add((line, kind, where))
            findings.append(CheckFinding(path, line, kind, where))

    limit = _format.MAX_LINE_BYTES
    with open_for_reading(path) as source:
        number = 0
        while raw := source.readline(limit + 1):
            number += 1
            if len(raw) > limit and not raw.endswith(b"\n"):
                add(number, f"a line longer than {limit} bytes, not scanned", None)
                while (rest := source.readline(limit + 1)) and not rest.endswith(b"\n"):
                    pass
                continue
            text = raw.decode("utf-8", errors="replace")
            for finding in scrubber.findings(text, number):
                add(number, f"secret ({finding.kind})", None)
            try:
                value = json.loads(text)
            except (ValueError, RecursionError):
                for kind in customer_data_kinds(text):
                    add(number, kind, None)
                continue
            for where, string in _strings(value):
                for kind in customer_data_kinds(string):
                    add(number, kind, where)
            exchange = value.get("exchange") if isinstance(value, dict) else None
            if isinstance(exchange, dict):
                shown = {kind for line, kind, _ in seen if line == number}
                for kind, where in _exchange_findings(exchange, scrubber):
                    if kind not in shown:
                        add(number, kind, where)
    return findings


def _exchange_findings(exchange: dict[str, Any], scrubber: Scrubber) -> Iterator[tuple[str, str]]:
    """What a wire line's strings one by one do not show, as (kind, where): a secret cut
    across a stream's chunks (its events joined as a replay reads them), one in a body kept
    as bytes (a binary answer, an upload's parts), a body in a content encoding cafe cannot
    undo; and customer data there. A kind the line's strings already showed is not reported
    again."""
    from cafe.wire._scrub import exchange_findings

    found, texts = exchange_findings(exchange, scrubber)
    for finding in found:
        yield f"secret ({finding.kind})" if finding.secret else finding.kind, finding.where
    for where, text in texts:
        for kind in customer_data_kinds(text):
            yield kind, where


def check_recordings(paths: Sequence[Path | str], scrubber: Scrubber | None = None) -> list[CheckFinding]:
    return [finding for path in paths for finding in check_file(path, scrubber)]
