"""An exchange's stream and bodies scrubbed as wholes, not string by string.

A line's strings are scrubbed one at a time (`RecordingWriter`), but a stream's chunks are
pieces of one text, and a base64 body is bytes no string pattern reads. Here:

- A `text/event-stream` answer is read whole: its chunks joined, split into events, and each
  event's JSON `data` walked; the strings that continue one another (the same JSON path, in
  events of the same `type`, under the same `index`, `output_index`, `content_index`,
  `item_id`: Chat Completions' `delta.content` and tool-call `arguments`, the Responses API's
  `output_text` and `function_call_arguments` deltas, Anthropic's `text_delta` and
  `input_json_delta`) are joined, and a secret the joined text holds is replaced in every
  chunk that holds a piece of it, however the server cut it (between reads, between events,
  or both). The chunks stay as many, at the same offsets, so the stream replays chunk for
  chunk with its timing.
- A body is read as its bytes: a multipart upload part by part (its form fields, its files'
  names and contents; a field named like a secret is one), a form body as a query is, and
  bytes that are not UTF-8 (a binary answer, an upload, a content encoding cafe cannot undo)
  for the ASCII secrets in them.

`scrubbed_exchange` is what the writer keeps; `exchange_findings` what `check-recording`
reports of a line another tool wrote. A body in a content encoding cafe cannot undo is kept as
it came and reported by `check-recording` as not scanned.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Any, TypeGuard
from urllib.parse import unquote_plus

import orjson

from cafe.privacy import REDACTED, Scrubber, secret_key
from cafe.wire._exchange import decoded_body, is_form_credential, payload, payload_bytes
from cafe.wire._multipart import Multipart, Part, boundary_of, read_multipart

_REDACTED_BYTES = REDACTED.encode("ascii")
_BLOCK_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_LINE_END = re.compile(rb"\r\n|\n|\r")
# A JSON string, its body the first group, the second set when it is an object key.
_STRING = re.compile(rb'"([^"\\]*(?:\\.[^"\\]*)*)"(\s*:)?', re.DOTALL)
# A JSON string's body as tokens: a surrogate pair, one `\uXXXX`, another escape, a plain run.
_STRING_TOKEN = re.compile(rb'\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})'
                           rb'|\\u([0-9a-fA-F]{4})|\\(.)|[^\\]+', re.DOTALL)
_ESCAPED = {b'"': '"', b"\\": "\\", b"/": "/", b"b": "\b", b"f": "\f", b"n": "\n", b"r": "\r", b"t": "\t"}
# The fields that tell the pieces of one streamed text from another's (a choice's, an output
# item's, a content block's): never a sequence number, which changes every event.
_INDEX_FIELDS = ("index", "output_index", "content_index", "item_id", "summary_index")
_FORM = "application/x-www-form-urlencoded"
_QUERY_PAIR = re.compile(r"([^&=]*)=([^&]*)")

Span = tuple[int, int, str]
"""(start, end, kind) of a secret, in bytes of the text it was found in."""


# --- a stream ------------------------------------------------------------------------------


class _Event:
    """A JSON `data` line of the joined stream, from `start` to `end`: where its strings lie
    is read only when one of them holds a piece of a secret."""

    __slots__ = ("end", "start", "strings")

    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end
        self.strings: list[tuple[int, int]] | None = None


# A group's key is its path as one string (a string's hash is kept, a tuple's is not): the
# event's name and type, then each step, an object's key after its index fields, a list's
# position (`*` for items told apart by index fields of their own).
_HEAD, _MARKS, _KEY, _ITEM = "\x1c", "\x1f", "\x1e", "\x1d"
_ORDINALS = 1 << 20  # a JSON piece's place: its event's number times this, plus its ordinal


class _Group:
    """The strings that continue one another, in stream order: each piece's text and where it
    lies (a JSON string: an int, its event's number and its place among the event's string
    values; a line of text: its bytes)."""

    __slots__ = ("places", "texts")

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.places: list[int | tuple[int, int]] = []


@dataclass
class StreamText:
    """A stream's chunks read as one text: the strings that continue one another, joined
    (`texts`), and where each piece lies, to replace a secret in the chunks that hold it."""

    data: bytes
    groups: dict[str, _Group] = field(default_factory=dict)
    events: list[_Event] = field(default_factory=list)

    @property
    def texts(self) -> list[str]:
        return ["".join(group.texts) for group in self.groups.values()]

    def spans(self, scrubber: Scrubber) -> list[Span]:
        """Where the joined stream holds a secret, in bytes, merged and in order."""
        found: list[Span] = []
        for key, group in self.groups.items():
            texts = group.texts
            step, _, name = key.rpartition(_KEY)
            named = bool(step) and _ITEM not in name and _MARKS not in name and secret_key(name)
            if len(texts) > 1 and texts.count(texts[0]) == len(texts):
                # One value repeated (an id, the model) is no text cut into pieces: each
                # piece holds what one does.
                spans = _whole(texts[0], scrubber, named)
                spans = [(start + at, end + at, kind) for at in _starts(texts) for start, end, kind in spans]
            else:
                spans = scrubber.secret_spans("".join(texts))
                # A field named like a secret (`api_key`): every piece of it is one.
                spans += [span for text, at in zip(texts, _starts(texts), strict=True)
                          for span in _whole(text, scrubber, named, secret=False, at=at)]
            if spans:
                found += self._located(group, spans)
        return _merged(found)

    def _located(self, group: _Group, spans: list[Span]) -> list[Span]:
        """Spans of a group's joined text, in bytes of the stream."""
        located: list[Span] = []
        starts = _starts(group.texts)
        for start, end, kind in spans:
            for position in range(max(bisect.bisect_right(starts, start) - 1, 0), len(starts)):
                piece_start, text = starts[position], group.texts[position]
                if piece_start >= end:
                    break
                piece_end = piece_start + len(text)
                if piece_end <= start or piece_start == piece_end:
                    continue
                where, positions = self._positions(group.places[position], text)
                if positions is None:  # its bytes do not read back as its text: all of them
                    located.append((*where, kind))
                    continue
                low, high = max(start, piece_start) - piece_start, min(end, piece_end) - piece_start
                located.append((positions[low], positions[high], kind))
        return located

    def _positions(self, place: int | tuple[int, int], text: str) -> tuple[tuple[int, int], list[int] | None]:
        """Where a piece lies in the stream's bytes, and where each of its characters starts
        there (one more: its end), or None when its bytes do not read back as its text."""
        if isinstance(place, tuple):
            return place, _text_positions(*place, text)
        event, ordinal = self.events[place // _ORDINALS], place % _ORDINALS
        if event.strings is None:
            event.strings = _string_values(self.data, event.start, event.end)
        if ordinal >= len(event.strings):
            return (event.start, event.end), None
        start, end = event.strings[ordinal]
        return (start, end), _escaped_positions(self.data, start, end, text)


def _whole(text: str, scrubber: Scrubber, named: bool, *, secret: bool = True, at: int = 0) -> list[Span]:
    """The secrets of one piece: all of it when its field is named like a secret, and (with
    `secret`) what the scrubber finds in it, from `at` on."""
    if named and text and text != REDACTED:
        return [(at, at + len(text), "secret-named field")]
    return [(start + at, end + at, kind) for start, end, kind in scrubber.secret_spans(text)] if secret else []


def _starts(texts: list[str]) -> list[int]:
    starts, at = [], 0
    for text in texts:
        starts.append(at)
        at += len(text)
    return starts


def read_stream(data: bytes) -> StreamText:
    """The joined bytes of a stream's chunks, read as server-sent events."""
    stream = StreamText(data)
    position, size = 0, len(data)
    while position < size:
        found = _BLOCK_END.search(data, position)
        end = size if found is None else found.start()
        if data.startswith(b"data: {", position) and data.find(b"\n", position, end) < 0 and data.find(
                b"\r", position, end) < 0:
            _read_event(stream, position + 6, end, "")  # the usual block: one line of JSON data
        else:
            _read_block(stream, position, end)
        position = size if found is None else found.end()
    return stream


def _read_event(stream: StreamText, start: int, end: int, name: str) -> bool:
    """Reads the JSON data of one event into the groups; False when it is not JSON."""
    try:
        event = orjson.loads(stream.data[start:end])
    except orjson.JSONDecodeError:
        return False
    kind = type(event)
    if kind is not dict and kind is not list:
        return False
    kind_name = event.get("type") if kind is dict else None
    found: list[tuple[str, str]] = []
    _collect(event, f"{name}{_HEAD}{kind_name if isinstance(kind_name, str) else ''}", found)
    place = len(stream.events) * _ORDINALS
    stream.events.append(_Event(start, end))
    groups = stream.groups
    for ordinal, (key, text) in enumerate(found[:_ORDINALS]):
        group = groups.get(key)
        if group is None:
            group = groups[key] = _Group()
        group.texts.append(text)
        group.places.append(place + ordinal)
    return True


def _read_block(stream: StreamText, start: int, end: int) -> None:
    data = stream.data
    lines: list[tuple[int, int]] = []
    at = start
    for line_end in _LINE_END.finditer(data, start, end):
        lines.append((at, line_end.start()))
        at = line_end.end()
    if at < end:
        lines.append((at, end))
    name = next((data[a + 6:b].strip().decode("utf-8", "replace") for a, b in lines if data.startswith(b"event:", a)),
                "")
    data_lines = [(a, b) for a, b in lines if data.startswith(b"data:", a)]
    json_line = None
    if len(data_lines) == 1:
        a, b = data_lines[0]
        if _read_event(stream, a + (6 if data.startswith(b"data: ", a) else 5), b, name):
            json_line = data_lines[0]
    for a, b in lines:
        if (a, b) == json_line:
            continue
        if data.startswith(b"data:", a):
            # Plain-text data, streamed token by token: the events' pieces, joined.
            a += 6 if data.startswith(b"data: ", a) else 5
            key = f"data{_HEAD}{name}"
        else:
            key = f"line{_HEAD}{a}"
        group = stream.groups.get(key)
        if group is None:
            group = stream.groups[key] = _Group()
        group.texts.append(data[a:b].decode("utf-8", "surrogateescape"))
        group.places.append((a, b))


_INDEX_SET = frozenset(_INDEX_FIELDS)


def _collect(value: Any, path: str, found: list[tuple[str, str]]) -> None:
    """Each string value of a JSON value in document order, with its path: an object's keys
    after the object's index fields, a list's items by position, or by none when they have
    index fields of their own (a chunk's `choices[0]` may be choice 1)."""
    if type(value) is dict:
        if not _INDEX_SET.isdisjoint(value):
            path += _MARKS + ",".join(f"{name}={value[name]!r}" for name in _INDEX_FIELDS
                                      if type(value.get(name)) in (int, str))
        path += _KEY
        for key, item in value.items():
            kind = type(item)
            if kind is str:
                found.append((path + key, item))
            elif kind is dict or kind is list:
                _collect(item, path + key, found)
    else:
        for position, item in enumerate(value):
            kind = type(item)
            if kind is str:
                found.append((f"{path}{_ITEM}{position}", item))
            elif kind is dict:
                _collect(item, f"{path}{_ITEM}{'*' if not _INDEX_SET.isdisjoint(item) else position}", found)
            elif kind is list:
                _collect(item, f"{path}{_ITEM}{position}", found)


def _string_values(data: bytes, start: int, end: int) -> list[tuple[int, int]]:
    """Where the body of each string value (not an object key) of the JSON text lies."""
    return [match.span(1) for match in _STRING.finditer(data, start, end) if match.group(2) is None]


def _escaped_positions(data: bytes, start: int, end: int, text: str) -> list[int] | None:
    """Where each character of a JSON string's body starts (one more: its end), or None when
    the body does not read back as `text`."""
    positions: list[int] = []
    characters: list[str] = []
    for token in _STRING_TOKEN.finditer(data, start, end):
        if token.group(1) is not None:
            high, low = int(token.group(1), 16), int(token.group(2), 16)
            characters.append(chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)))
            positions.append(token.start())
        elif token.group(3) is not None:
            characters.append(chr(int(token.group(3), 16)))
            positions.append(token.start())
        elif token.group(4) is not None:
            escaped = _ESCAPED.get(token.group(4))
            if escaped is None:
                return None
            characters.append(escaped)
            positions.append(token.start())
        else:
            run = token.group(0).decode("utf-8", "surrogateescape")
            at = token.start()
            for character in run:
                characters.append(character)
                positions.append(at)
                at += len(character.encode("utf-8", "surrogateescape"))
    positions.append(end)
    return positions if "".join(characters) == text else None


def _text_positions(start: int, end: int, text: str) -> list[int]:
    positions, at = [], start
    for character in text:
        positions.append(at)
        at += len(character.encode("utf-8", "surrogateescape"))
    positions.append(end)
    return positions


def _merged(spans: list[Span]) -> list[Span]:
    merged: list[Span] = []
    for start, end, kind in sorted(spans):
        if start >= end:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]), merged[-1][2])
        else:
            merged.append((start, end, kind))
    return merged


def scrubbed_chunks(chunks: list[bytes], scrubber: Scrubber) -> list[bytes]:
    """The chunks with every piece of a secret the joined stream holds replaced by
    `[REDACTED]` where it lies (a secret cut across two chunks leaves one in each)."""
    data = b"".join(chunks)
    spans = read_stream(data).spans(scrubber)
    if not spans:
        return chunks
    scrubbed, at, pending = [], 0, 0
    for chunk in chunks:
        chunk_end = at + len(chunk)
        pieces: list[bytes] = []
        cut = at
        while pending < len(spans) and spans[pending][0] < chunk_end:
            start, end, _ = spans[pending]
            if end > at:
                low = max(start, at)
                pieces += (data[cut:low], _REDACTED_BYTES)
                cut = min(end, chunk_end)
            if end > chunk_end:
                break  # it goes on in the next chunk
            pending += 1
        pieces.append(data[cut:chunk_end])
        scrubbed.append(b"".join(pieces))
        at = chunk_end
    return scrubbed


# --- a body --------------------------------------------------------------------------------


def scrubbed_bytes(data: bytes, scrubber: Scrubber) -> bytes:
    """Bytes with every secret in them replaced: as text when they are UTF-8, else (a binary
    answer, a file) each byte a character, so the ASCII secrets in them are found."""
    try:
        return scrubber.scrub(data.decode("utf-8")).encode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return scrubber.scrub(data.decode("latin-1")).encode("latin-1")


def bytes_findings(data: bytes, scrubber: Scrubber) -> list[str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return [finding.kind for finding in scrubber.findings(text)]


def scrubbed_form(text: str, scrubber: Scrubber) -> str:
    """A form body with the value of each credential-named field replaced, then scrubbed."""

    def hide(match: re.Match[str]) -> str:
        name = match.group(1)
        return f"{name}={REDACTED}" if match.group(2) and is_form_credential(unquote_plus(name)) else match.group(0)

    return scrubber.scrub(_QUERY_PAIR.sub(hide, text))


def _scrubbed_part(part: Part, scrubber: Scrubber) -> Part:
    head = scrubber.scrub(part.head.decode("latin-1")).encode("latin-1")
    name = part.name
    if name is not None and part.content and is_form_credential(name):
        content = _REDACTED_BYTES
    else:
        content = scrubbed_bytes(part.content, scrubber)
    return Part(part.lead, head, content)


def multipart_of(held: dict[str, Any], content_type: str | None) -> Multipart | None:
    """A payload as its parts, when its content type says it is multipart and it reads so."""
    boundary = boundary_of(content_type)
    return None if boundary is None else read_multipart(payload_bytes(held), boundary)


def scrubbed_body(held: dict[str, Any], content_type: str | None, scrubber: Scrubber) -> dict[str, Any]:
    """A body's payload as the writer keeps it: a multipart body part by part, a form's
    credential fields, bytes that are not text as bytes; and then, as text, as every string of
    a line is scrubbed (so that a replay puts an incoming body through the same)."""
    multipart = multipart_of(held, content_type)
    if multipart is not None:
        data = multipart.with_parts(tuple(_scrubbed_part(part, scrubber) for part in multipart.parts)).to_bytes()
    elif "base64" in held:
        data = scrubbed_bytes(payload_bytes(held), scrubber)
    else:
        text = str(held.get("text", ""))
        if (content_type or "").split(";", 1)[0].strip().lower() == _FORM:
            return {"text": scrubbed_form(text, scrubber)}
        return {"text": scrubber.scrub(text)}
    kept = payload(data)
    if "text" in kept:
        kept["text"] = scrubber.scrub(kept["text"])
    return kept


# --- an exchange ---------------------------------------------------------------------------


def _content_type(headers: Any) -> str | None:
    value = headers.get("content-type") if isinstance(headers, dict) else None
    return value if isinstance(value, str) else None


def _is_payload(value: Any) -> TypeGuard[dict[str, Any]]:
    return isinstance(value, dict) and (isinstance(value.get("text"), str) or isinstance(value.get("base64"), str))


def _stream_chunks(stream: Any) -> list[bytes] | None:
    if not isinstance(stream, list) or not stream or not all(_is_payload(chunk) for chunk in stream):
        return None
    try:
        return [payload_bytes(chunk) for chunk in stream]
    except ValueError:  # base64 that is not: the reader refuses the line
        return None


def scrubbed_exchange(exchange: dict[str, Any], scrubber: Scrubber) -> dict[str, Any]:
    """The exchange with its stream and bodies scrubbed as wholes (`exchange` itself when that
    changes nothing); its strings are then scrubbed one by one, as every line's are."""
    changed: dict[str, Any] = {}
    chunks = _stream_chunks(exchange.get("stream"))
    if chunks is not None:
        scrubbed = scrubbed_chunks(chunks, scrubber)
        if scrubbed is not chunks:
            changed["stream"] = [{**{k: v for k, v in chunk.items() if k not in ("text", "base64")}, **payload(data)}
                                 for chunk, data in zip(exchange["stream"], scrubbed, strict=True)]
    for key, headers in (("request_body", "request_headers"), ("body", "response_headers")):
        held = exchange.get(key)
        if _is_payload(held):
            try:
                kept = scrubbed_body(held, _content_type(exchange.get(headers)), scrubber)
            except ValueError:
                continue
            if kept != held:
                changed[key] = kept
    return {**exchange, **changed} if changed else exchange


@dataclass(frozen=True)
class ExchangeFinding:
    """`kind` of secret found at `where`; with `secret` False, what could not be scanned."""

    where: str
    kind: str
    secret: bool = True


def exchange_findings(exchange: dict[str, Any],
                      scrubber: Scrubber) -> tuple[list[ExchangeFinding], list[tuple[str, str]]]:
    """What a line's exchange holds that its strings one by one do not show: the secrets of
    its stream read whole and of its bodies read as bytes (a multipart body part by part, a
    body in a content encoding cafe undoes, decoded), a body in one it cannot undo (not
    scanned); and the texts of the stream and the bodies, for the customer-data checks."""
    findings: list[ExchangeFinding] = []
    texts: list[tuple[str, str]] = []
    chunks = _stream_chunks(exchange.get("stream"))
    if chunks is not None:
        response_headers = exchange.get("response_headers")
        encoding = response_headers.get("content-encoding") if isinstance(response_headers, dict) else None
        if isinstance(encoding, str) and encoding.strip():
            decoded = decoded_body(b"".join(chunks), encoding)
            if decoded is None:
                findings.append(ExchangeFinding("$.exchange.stream", f"a stream in content-encoding "
                                                f"{_shown_encoding(encoding)}, which cafe cannot decode: not scanned",
                                                secret=False))
            else:
                chunks = [decoded]
        stream = read_stream(b"".join(chunks))
        findings += [ExchangeFinding("$.exchange.stream", kind) for _, _, kind in stream.spans(scrubber)]
        texts += [("$.exchange.stream", text) for text in stream.texts]
    for key, headers_key in (("request_body", "request_headers"), ("body", "response_headers")):
        held = exchange.get(key)
        if not _is_payload(held):
            continue
        where = f"$.exchange.{key}"
        headers = exchange.get(headers_key)
        headers = headers if isinstance(headers, dict) else {}
        try:
            data = payload_bytes(held)
        except ValueError:
            continue
        encoding = headers.get("content-encoding")
        if isinstance(encoding, str) and encoding.strip():
            decoded = decoded_body(data, encoding)
            if decoded is None:
                findings.append(ExchangeFinding(where, f"a body in content-encoding {_shown_encoding(encoding)}, "
                                                       "which cafe cannot decode: not scanned", secret=False))
                continue
            data = decoded
        boundary = boundary_of(_content_type(headers))
        multipart = None if boundary is None else read_multipart(data, boundary)
        for part in multipart.parts if multipart is not None else (Part(b"", b"", data),):
            findings += [ExchangeFinding(where, kind) for kind in bytes_findings(part.head + part.content, scrubber)]
            name = part.name
            if name is not None and part.content not in (b"", _REDACTED_BYTES) and is_form_credential(name):
                findings.append(ExchangeFinding(where, "secret-named field"))
            try:
                texts.append((where, part.content.decode("utf-8")))
            except UnicodeDecodeError:
                continue
    return findings, texts


def _shown_encoding(encoding: str) -> str:
    return ", ".join(name.strip() if re.fullmatch(r"[A-Za-z0-9._-]{1,32}", name.strip()) else "?"
                     for name in encoding.split(","))

