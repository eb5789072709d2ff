"""Reading a recording strictly, line by line, without ever writing to it.

Each problem is raised as the named error that says which file, line and field, and what
was expected. Values are described by type and size, never quoted: a recording holds
customer conversations and these messages end up in CI logs.

The file is opened read-only and read one line at a time, each line bounded by
`format.MAX_LINE_BYTES`, so a corrupt or hostile file is never parsed into memory whole.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from cafe.jsondata import describe as _kind
from cafe.recording import format as _format
from cafe.recording.errors import (
    MalformedLine,
    NotARecording,
    RecordingNotFound,
    TruncatedRecording,
    UnsupportedVersion,
)
from cafe.recording.format import (
    FORMAT_NAME,
    FORMAT_VERSION,
    LEGACY_VERSION,
    SUPPORTED_VERSIONS,
    WIRE_VERSION,
    Ending,
    Header,
    Link,
    RecordedCall,
    Recording,
    Reference,
    SharedRequest,
    Timing,
    is_unordered,
    layout,
    reference_digest,
    shares,
)
from cafe.trace.outcomes import ConsentDecision

_DECISIONS = frozenset(ConsentDecision)
_OUTCOMES = frozenset({"completed", "closed_early", "failed"})
_SHA256 = re.compile(r"[0-9a-f]{64}")
# Times must fit OTLP's and the OS's 64-bit nanoseconds; no model call lasts a day.
MAX_UNIX_NANO = 2**63 - 1
MAX_DURATION_NS = 86_400 * 1_000_000_000
_HEADER_RANGES = {
    "clock_origin_unix_nano": (0, MAX_UNIX_NANO, "an integer of nanoseconds"),
    "seed": (-(2**63), 2**63 - 1, "an integer"),
    "max_turns": (1, 1_000_000, "an integer"),
    "max_repairs": (0, 1_000_000, "an integer"),
    "temperature": (0, 2, "a number"),
}


def _size(value: int | float) -> str:
    """An out-of-range number, described without quoting it."""
    if abs(value) < 10**6:
        return str(value)
    sign = "a negative" if value < 0 else "a"
    return f"{sign} number of {len(str(abs(int(value))))} digits"


def _found(obj: dict[str, Any], key: str) -> str:
    return _kind(obj[key]) if key in obj else "no such key"


class _NotJson(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not a JSON number")


def _strict_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _NotJson("a number too large for a 64-bit float")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise _NotJson("an object with a duplicated key")
    return result


# orjson reads an integer beyond 64 bits as a float where the strict decoder keeps it exact.
# Such a float is at least 2**63 in size (orjson refuses one that overflows a double), and
# orjson writes every float from 1e16 up in exponent form with its sign ("1.8e+19"), so a
# re-encoding with no "+" in it proves the line held no such integer. Only where one has a
# "+" (a large float, a "+" in a string) is the line scanned for a run of 20 digits, or of 19
# after a minus sign, and left to the strict decoder if it has one (found in C: every digit
# mapped to "0", then two substring searches; a copy of the line that most lines now skip).
_DIGITS_AS_ZERO = bytes.maketrans(b"0123456789", b"0" * 10)
_LONG_INTEGERS = (b"0" * 20, b"-" + b"0" * 19)


def _long_integer(raw: bytes) -> bool:
    digits = raw.translate(_DIGITS_AS_ZERO)
    return _LONG_INTEGERS[0] in digits or _LONG_INTEGERS[1] in digits


# A call line's members that the recording keeps as orjson's bytes (see `_held`).
_HELD = ("request", "response")


def _decode_fast(raw: bytes) -> Any:
    """The line decoded by orjson, only where it provably agrees with `_decode`; else None."""
    decoded = _decode_fast_held(raw)
    return None if decoded is None else decoded[0]


def _decode_fast_held(raw: bytes) -> tuple[Any, dict[str, bytes]] | None:
    """The line decoded by orjson, only where it provably agrees with `_decode`, with the
    encodings of its `request` and `response` members; else None (then `_decode` gives the
    verdict and the named error).

    orjson already refuses what the strict decoder refuses (NaN, Infinity, numbers that
    overflow a double, bytes that are not UTF-8, control characters, lone surrogates) but
    reads integers beyond 64 bits as floats and keeps the last of duplicated keys. Two proofs
    that neither happened, the first one cheap and the second one general:

    - a line in its canonical form (what cafe's writer writes: no whitespace, the escapes
      orjson writes) is exactly orjson's encoding of what orjson read from it. A dropped
      member would make the encoding shorter, an integer read as a float would be written in
      another form, and any other spelling (spaces, `\\u003a`, `1E5`) differs too;
    - any other line is counted (`_counted`)."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    try:
        canonical = orjson.dumps(value) == raw
    except orjson.JSONEncodeError:  # nested deeper than orjson writes
        return None
    if canonical:
        return value, _canonical_pieces(value, raw)
    return _counted(raw, value)


# The members of a call line as cafe's writer writes them, in its (sorted) order.
_CALL_KEYS = ("call", "request", "response", "timing")


def _canonical_pieces(value: Any, raw: bytes) -> dict[str, bytes]:
    """The encodings of a canonical line's request and response. The line is orjson's
    encoding of `value`, so a member's encoding is a slice of it: for a call line laid out as
    the writer lays it out, the request is what lies between the encoded members around it."""
    if type(value) is not dict:
        return {}
    if tuple(value) == _CALL_KEYS:
        response = orjson.dumps(value["response"])
        start = len(b'{"call":,"request":') + len(orjson.dumps(value["call"]))
        end = len(raw) - len(b',"response":,"timing":}') - len(response) - len(orjson.dumps(value["timing"]))
        return {"request": raw[start:end], "response": response}
    return {key: orjson.dumps(value[key]) for key in _HELD if key in value}


def _counted(raw: bytes, value: Any) -> tuple[Any, dict[str, bytes]] | None:
    """`value`, read by orjson from a line that is not in its canonical form, if the count of
    its colons proves that no key was dropped; else None.

    Every key in the text is followed by one colon outside a string, and orjson writes every
    key and every colon inside a string back as they were read, so re-encoding the decoded
    value gives as many colons as the line holds exactly when no key was dropped (a dropped
    member takes its key's colon with it). The value is re-encoded in pieces, the request and
    the response apart from the rest of the line (each piece's key adds its one colon), so
    that those encodings can be kept."""
    # An escaped colon (\u003a) would hide a duplicated key from the count below.
    if b"\\u003" in raw:
        return None
    held: dict[str, bytes] = {}
    try:
        rest = value
        if type(value) is dict and ("request" in value or "response" in value):
            rest = dict(value)
            for key in _HELD:
                if key in rest:
                    held[key] = orjson.dumps(rest.pop(key))
        encoded = orjson.dumps(rest)
    except orjson.JSONEncodeError:
        return None
    if encoded.count(b":") + sum(piece.count(b":") + 1 for piece in held.values()) != raw.count(b":"):
        return None
    if (b"+" in encoded or any(b"+" in piece for piece in held.values())) and _long_integer(raw):
        return None
    return value, held


# Subclasses, dataclasses and datetimes refused, as in cafe.jsondata (a decoded line holds none).
_PLAIN = (orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATACLASS
          | orjson.OPT_PASSTHROUGH_DATETIME)


def _held(document: dict[str, Any], data: bytes | None) -> dict[str, Any] | bytes:
    """A checked request or response as the recording keeps it: orjson's bytes (`data`, made
    while the line was decoded, or made now), which decode to an identical value (same types,
    same key order), or the value itself where orjson cannot write it (integers beyond 64 bits,
    lone surrogates: values only the strict decoder reads)."""
    if data is None:
        try:
            data = orjson.dumps(document, option=_PLAIN)
        except orjson.JSONEncodeError:
            return document
    return data


def _decode(text: str) -> Any:
    return json.loads(
        text,
        parse_constant=_reject_constant,
        parse_float=_strict_float,
        object_pairs_hook=_unique_keys,
    )


def open_for_reading(path: Path) -> IO[bytes]:
    """Open a regular file read-only, or raise the named error saying why not."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise RecordingNotFound(path) from None
    except IsADirectoryError:
        raise NotARecording(path, "it is a directory") from None
    except PermissionError:
        raise NotARecording(path, "it cannot be read (permission denied)") from None
    except OSError as error:
        raise NotARecording(path, f"it cannot be opened ({type(error).__name__})") from None
    mode = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        why = "it is a directory" if stat.S_ISDIR(mode) else "it is not a regular file"
        raise NotARecording(path, why)
    return os.fdopen(descriptor, "rb")


# What a message's content may be: a string, an array of parts, or null.
_PLAIN_CONTENT = frozenset((str, list, type(None)))


def _plain_tool_call(call: Any) -> bool:
    """A tool call `_LineReader.message` would accept, checked without naming a field."""
    if type(call) is not dict or type(call.get("id")) is not str:
        return False
    function = call.get("function")
    return (type(function) is dict and type(function.get("name")) is str
            and type(function.get("arguments")) is str)


def check_header(path: Path | str, obj: dict[str, Any]) -> None:
    """Raise the `MalformedLine` the reader would raise for this header line (the writer
    asks before it records: a header out of range would make a recording no one can read)."""
    _LineReader(Path(path)).header(obj)


class _LineReader:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.header_model: str | None = None
        self.version = LEGACY_VERSION
        self.numbers: set[int] = set()  # version 3: the call numbers read so far
        # Versions 4 to 6: each call read so far by its number, and, for those a reference
        # named, what a later reference to them is checked against.
        self.by_number: dict[int, RecordedCall] = {}
        self.shared: dict[int, SharedRequest] = {}

    def fail(self, line: int, expected: str, found: str, field: str | None = None) -> MalformedLine:
        return MalformedLine(self.path, line, expected, found, field)

    def parse(self, raw: bytes, number: int) -> tuple[dict[str, Any], dict[str, bytes]]:
        """The line's object, and the encodings the fast decoder made of its request and
        response (none when the strict decoder read it)."""
        fast = _decode_fast_held(raw)
        if fast is not None and type(fast[0]) is dict:
            return fast
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            if number == 1:
                raise NotARecording(self.path, "line 1 is binary, not UTF-8 text", line=1) from None
            raise self.fail(
                number, "UTF-8 text", f"a byte that is not UTF-8 at offset {error.start}"
            ) from None
        if not text.strip():
            raise self.fail(number, "a JSON object", "an empty line")
        try:
            value = _decode(text)
        except json.JSONDecodeError as error:
            if number == 1:
                raise NotARecording(self.path, f"line 1 is not JSON ({error.msg})", line=1) from None
            raise self.fail(
                number, "a JSON object", f"invalid JSON ({error.msg} at column {error.colno})"
            ) from None
        except _NotJson as error:
            raise self.fail(number, "a JSON object", f"invalid JSON ({error})") from None
        except (ValueError, RecursionError) as error:
            # int() refuses integers of thousands of digits; deep nesting exhausts the stack.
            why = "nesting too deep" if isinstance(error, RecursionError) else "a number too long to read"
            raise self.fail(number, "a JSON object", f"invalid JSON ({why})") from None
        if not isinstance(value, dict):
            raise self.fail(number, "a JSON object", _kind(value))
        return value, {}

    def header(self, obj: dict[str, Any]) -> Header:
        if obj.get("format") != FORMAT_NAME:
            raise NotARecording(
                self.path, f'line 1 has a "format" key, but not "{FORMAT_NAME}"', line=1
            )
        if "version" not in obj or type(obj["version"]) is not int:
            raise self.fail(1, f"an integer format version ({FORMAT_VERSION})", _found(obj, "version"),
                            field="version")
        version = obj["version"]
        if version not in SUPPORTED_VERSIONS or version == LEGACY_VERSION:
            raise UnsupportedVersion(self.path, 1, version, SUPPORTED_VERSIONS)
        types = {
            "harness": str, "model": str, "provider": str, "recorded_at": str,
            "seed": int, "clock_origin_unix_nano": int, "conversation_id": str,
            "script": list, "decisions": list, "max_turns": int, "max_repairs": int,
            "temperature": float,
        }
        for key, expected in types.items():
            value = obj.get(key)
            if value is None:
                continue
            if expected is float and type(value) is int:
                continue
            if type(value) is not expected:
                name = {"str": "a string", "int": "an integer", "list": "an array",
                        "float": "a number"}[expected.__name__]
                raise self.fail(1, f"{name} or null", _kind(value), field=key)
        for key, (low, high, unit) in _HEADER_RANGES.items():
            value = obj.get(key)
            if value is not None and not low <= value <= high:
                raise self.fail(1, f"{unit} from {low} to {high}", _size(value), field=key)
        for index, line in enumerate(obj.get("script") or []):
            if not isinstance(line, str):
                raise self.fail(1, "a string (a customer line)", _kind(line), field=f"script[{index}]")
        for index, decision in enumerate(obj.get("decisions") or []):
            self.decision(decision, f"decisions[{index}]")
        return Header(version=version, **{key: obj.get(key) for key in types})

    def decision(self, decision: Any, where: str) -> None:
        if not isinstance(decision, list) or not 1 <= len(decision) <= 2:
            raise self.fail(1, "an array [kind] or [kind, payload]", _kind(decision), field=where)
        kind = decision[0]
        if kind not in _DECISIONS:
            found = "another string" if isinstance(kind, str) else _kind(kind)
            raise self.fail(1, "approve, reject or edit", found, field=f"{where}[0]")
        payload = decision[1] if len(decision) == 2 else None
        if kind == ConsentDecision.EDIT:
            if payload is not None and not isinstance(payload, dict):
                raise self.fail(1, "an object (the edited order) or null", _kind(payload), field=f"{where}[1]")
        elif payload is not None:
            raise self.fail(1, f"null ({kind} takes no payload)", _kind(payload), field=f"{where}[1]")

    def call(self, obj: dict[str, Any], number: int, index: int, legacy: bool,
             held: dict[str, bytes]) -> RecordedCall:
        if "format" in obj:
            raise self.fail(number, "a call line", "a second header line")
        if layout(self.version) >= WIRE_VERSION:
            return self.wire_call(obj, number, index, held)
        if not legacy:
            if type(obj.get("call")) is not int:
                raise self.fail(number, "an integer call number", _found(obj, "call"), field="call")
            if obj["call"] != index:
                expected = f"call {index} (calls are numbered in order from 1)"
                found = obj["call"]  # an integer of up to thousands of digits: its size only
                raise self.fail(number, expected, f"call {found}" if abs(found) < 10**6 else _size(found),
                                field="call")
        request, response = obj.get("request"), obj.get("response")
        if not isinstance(request, dict):
            raise self.fail(number, "an object", _found(obj, "request"), field="request")
        reference, base = self.reference(obj, request, number, index)
        self.request(request, number, whole=reference is None)
        if not isinstance(response, dict):
            raise self.fail(number, "an object", _found(obj, "response"), field="response")
        self.response(response, number)
        model = obj.get("model")
        if model is not None and not isinstance(model, str):
            raise self.fail(number, "a string or null", _kind(model), field="model")
        request_model = request.get("model")
        if request_model is not None and not isinstance(request_model, str):
            raise self.fail(number, "a string or null", _kind(request_model), field="request.model")
        return self.kept(RecordedCall.loaded(index, number, _held(request, held.get("request")),
                                             _held(response, held.get("response")), self.timing(obj, number),
                                             model, self.header_model, reference=reference, base=base),
                         request)

    def call_number(self, obj: dict[str, Any], number: int, index: int) -> None:
        if type(obj.get("call")) is not int:
            raise self.fail(number, "an integer call number", _found(obj, "call"), field="call")
        if obj["call"] != index:
            found = obj["call"]
            raise self.fail(number, f"call {index} (calls are numbered in order from 1)",
                            f"call {found}" if abs(found) < 10**6 else _size(found), field="call")

    def unordered_call_number(self, obj: dict[str, Any], number: int) -> int:
        """A version 3 line's call number: any call's, once (the lines are in the order the
        calls ended, and a call that never ended has none)."""
        found = obj.get("call")
        if type(found) is not int:
            raise self.fail(number, "a positive integer call number", _found(obj, "call"), field="call")
        if not 1 <= found <= MAX_UNIX_NANO:
            raise self.fail(number, "a positive integer call number",
                            f"call {found}" if abs(found) < 10**6 else _size(found), field="call")
        if found in self.numbers:
            raise self.fail(number, "a call number no earlier line holds", f"call {found} again", field="call")
        self.numbers.add(found)
        return found

    def wire_call(self, obj: dict[str, Any], number: int, index: int, held: dict[str, bytes]) -> RecordedCall:
        """A version 2 line: `request` is the JSON body as sent (or null when it was not a
        JSON object), `response` the JSON body answered or assembled from the stream (or
        null), and `exchange` the rest of the HTTP exchange. A version 3 line is the same,
        numbered by its call's start whatever its place in the file."""
        if is_unordered(self.version):
            index = self.unordered_call_number(obj, number)
        else:
            self.call_number(obj, number, index)
        request, response = obj.get("request"), obj.get("response")
        if request is not None and not isinstance(request, dict):
            raise self.fail(number, "an object or null", _kind(request), field="request")
        if response is not None and not isinstance(response, dict):
            raise self.fail(number, "an object or null", _kind(response), field="response")
        reference, base = self.reference(obj, request, number, index)
        if isinstance(request, dict) and "messages" in request:
            self.request(request, number, whole=reference is None)
        if isinstance(response, dict) and "choices" in response:
            self.response(response, number)
        exchange = obj.get("exchange")
        if not isinstance(exchange, dict):
            raise self.fail(number, "an object (the HTTP exchange)", _found(obj, "exchange"), field="exchange")
        self.exchange(exchange, number)
        request_model = (request or {}).get("model")
        if request_model is not None and not isinstance(request_model, str):
            raise self.fail(number, "a string or null", _kind(request_model), field="request.model")
        return self.kept(RecordedCall.loaded(index, number,
                                             {} if request is None else _held(request, held.get("request")),
                                             {} if response is None else _held(response, held.get("response")),
                                             self.timing(obj, number), None, self.header_model, exchange,
                                             reference=reference, base=base),
                         request)

    def exchange(self, exchange: dict[str, Any], number: int) -> None:
        for key in ("method", "target", "outcome"):
            if not isinstance(exchange.get(key), str):
                raise self.fail(number, "a string", _found(exchange, key), field=f"exchange.{key}")
        if exchange["outcome"] not in _OUTCOMES:
            raise self.fail(number, "completed, closed_early or failed", _kind(exchange["outcome"]),
                            field="exchange.outcome")
        status = exchange.get("status")
        if status is not None and (type(status) is not int or not 100 <= status <= 999):
            raise self.fail(number, "an HTTP status (100 to 999) or null", _found(exchange, "status"),
                            field="exchange.status")
        failure = exchange.get("failure")
        if failure is not None and not isinstance(failure, str):
            raise self.fail(number, "a string or null", _kind(failure), field="exchange.failure")
        for key in ("request_headers", "response_headers"):
            headers = exchange.get(key)
            if headers is None:
                continue
            if not isinstance(headers, dict):
                raise self.fail(number, "an object of header values", _kind(headers), field=f"exchange.{key}")
            for value in headers.values():
                if not isinstance(value, str):
                    raise self.fail(number, "a string", _kind(value), field=f"exchange.{key}.<a header>")
        for key in ("request_body", "body"):
            if exchange.get(key) is not None:
                self.payload(exchange[key], number, f"exchange.{key}")
        for key in ("request_json", "response_json"):  # a café shift's line: the bodies beside its call
            if exchange.get(key) is not None and not isinstance(exchange[key], dict):
                raise self.fail(number, "an object or null", _kind(exchange[key]), field=f"exchange.{key}")
        stream = exchange.get("stream")
        if stream is None:
            return
        if not isinstance(stream, list):
            raise self.fail(number, "an array of chunks or null", _kind(stream), field="exchange.stream")
        for position, chunk in enumerate(stream):
            where = f"exchange.stream[{position}]"
            if not isinstance(chunk, dict):
                raise self.fail(number, "a chunk object", _kind(chunk), field=where)
            offset = chunk.get("offset_ns")
            if type(offset) is not int or not 0 <= offset <= MAX_DURATION_NS:
                raise self.fail(number, f"an integer of nanoseconds from 0 to {MAX_DURATION_NS}",
                                _found(chunk, "offset_ns"), field=f"{where}.offset_ns")
            self.payload(chunk, number, where)

    def payload(self, payload: Any, number: int, where: str) -> None:
        if not isinstance(payload, dict):
            raise self.fail(number, "an object with text or base64", _kind(payload), field=where)
        text, data = payload.get("text"), payload.get("base64")
        if (text is None) == (data is None):
            raise self.fail(number, "exactly one of text and base64", "both or neither", field=where)
        if not isinstance(text if data is None else data, str):
            raise self.fail(number, "a string", _kind(text if data is None else data), field=where)
        if data is not None:
            try:
                base64.b64decode(data, validate=True)
            except ValueError:
                raise self.fail(number, "base64 text", "other text", field=f"{where}.base64") from None

    def request(self, request: dict[str, Any], number: int, whole: bool = True) -> None:
        """Check a request's messages, tools and temperature: a request held whole, or the part
        a line holds of one that refers to an earlier call's (`whole` false: its members the
        earlier call holds may be missing, and its messages are the new ones)."""
        messages = request.get("messages")
        if not whole and "messages" not in request:
            messages = []
        if not isinstance(messages, list):
            raise self.fail(number, "an array of messages", _found(request, "messages"),
                            field="request.messages")
        for position, message in enumerate(messages):
            # The common message (role and text, perhaps well-formed tool calls) passes here
            # without a call or a field name made for it; any other goes through every check
            # in `message`, which names the field at fault.
            if (type(message) is dict and type(message.get("role")) is str
                    and type(message.get("content")) in _PLAIN_CONTENT):
                tool_calls = message.get("tool_calls")
                if tool_calls is None or (type(tool_calls) is list and all(map(_plain_tool_call, tool_calls))):
                    continue
            self.message(message, number, f"request.messages[{position}]")
        tools = request.get("tools")
        if tools is not None and not isinstance(tools, list):
            raise self.fail(number, "an array or null", _kind(tools), field="request.tools")
        temperature = request.get("temperature")
        if temperature is not None and (isinstance(temperature, bool)
                                        or not isinstance(temperature, int | float)):
            raise self.fail(number, "a number or null", _kind(temperature), field="request.temperature")

    def reference(self, obj: dict[str, Any], request: Any, number: int,
                  index: int) -> tuple[Reference | None, RecordedCall | None]:
        """A line's `extends`, checked against the call it names: an earlier call (a smaller
        number, on an earlier line), whose request has the array, at least `count` items in it,
        and the digest the reference holds. Without `extends`, (None, None)."""
        extends = obj.get("extends")
        if extends is None:
            return None, None
        if not shares(self.version):
            raise self.fail(number, "no extends (a recording of this version holds every request whole)",
                            _kind(extends), field="extends")
        if not isinstance(extends, dict):
            raise self.fail(number, "an object (the call this request extends)", _kind(extends), field="extends")
        if not isinstance(request, dict):
            raise self.fail(number, "an object (the request's own part)", _kind(request), field="request")
        named = extends.get("call")
        if type(named) is not int or not 1 <= named < index or named not in self.by_number:
            found = _found(extends, "call") if type(named) is not int else (
                f"call {named}" if abs(named) < 10**6 else _size(named))
            raise self.fail(number, f"an earlier call's number (a call before {index} on an earlier line)", found,
                            field="extends.call")
        array, count, digest = extends.get("array"), extends.get("count"), extends.get("sha256")
        if not isinstance(array, str) or not array:
            raise self.fail(number, "the name of the request's growing array", _found(extends, "array"),
                            field="extends.array")
        if type(count) is not int or count < 0:
            raise self.fail(number, "a non-negative integer", _found(extends, "count"), field="extends.count")
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise self.fail(number, "64 lowercase hex digits", _found(extends, "sha256"), field="extends.sha256")
        if array in request and not isinstance(request[array], list):
            raise self.fail(number, "an array (the items after those of the call extended)", _kind(request[array]),
                            field=f"request.{array}" if array.isidentifier() else "request.<the array>")
        base = self.by_number[named]
        shared = self.shared_of(base, array, number)
        if count > shared.length:
            raise self.fail(number, f"at most {shared.length} (the items of call {named}'s array)",
                            f"{count}" if count < 10**9 else _size(count), field="extends.count")
        if reference_digest(shared.members, shared.chain_at(count)) != digest:
            raise self.fail(number, f"the digest of what call {named} (line {base.line}) holds of its first "
                                    f"{count} items", "another digest (the earlier lines were changed, or this "
                                                      "line belongs to another recording)",
                            field="extends.sha256")
        return Reference(named, array, count, digest), base

    def shared_of(self, call: RecordedCall, array: str, number: int) -> SharedRequest:
        """What a reference to `call` is checked against: made from its request when first
        named (a call held whole), or when its line was read (a call that extends another)."""
        known = self.shared.get(call.index)
        if known is not None and known.array == array:
            return known
        if call.reference is not None:
            raise self.fail(number, f"the array call {call.index} extends ({call.reference.array})",
                            "another array", field="extends.array")
        request = call.request
        items = request.get(array)
        if not isinstance(items, list):
            raise self.fail(number, f"an array call {call.index}'s request holds",
                            "a name its request holds no array by", field="extends.array")
        shared = SharedRequest(array, {key: value for key, value in request.items() if key != array}, Link.of(items))
        self.shared[call.index] = shared
        return shared

    def kept(self, call: RecordedCall, request: Any) -> RecordedCall:
        """Note a call read, for the references of later lines (versions 4 to 6)."""
        if not shares(self.version):
            return call
        self.by_number[call.index] = call
        reference = call.reference
        if reference is not None and call.base is not None:
            base = self.shared[call.base.index]
            own = request if isinstance(request, dict) else {}
            items = own.get(reference.array)
            added = items if isinstance(items, list) else []
            members = {**base.members, **{key: value for key, value in own.items() if key != reference.array}}
            link = base.link_at(reference.count).extended(added)
            self.shared[call.index] = SharedRequest(reference.array, members, link)
        return call

    def response(self, response: dict[str, Any], number: int) -> None:
        choices = response.get("choices")
        if not isinstance(choices, list) or not choices:
            found = _found(response, "choices") if not isinstance(choices, list) else "an empty array"
            raise self.fail(number, "a non-empty array of choices", found, field="response.choices")
        for position, choice in enumerate(choices):
            if not isinstance(choice, dict):
                raise self.fail(number, "an object", _kind(choice), field=f"response.choices[{position}]")
        first = choices[0]
        if not isinstance(first.get("message"), dict):
            raise self.fail(number, "an object", _found(first, "message"),
                            field="response.choices[0].message")
        self.message(first["message"], number, "response.choices[0].message")
        usage = response.get("usage")
        if usage is not None and not isinstance(usage, dict):
            raise self.fail(number, "an object or null", _kind(usage), field="response.usage")

    def message(self, message: Any, number: int, where: str) -> None:
        if not isinstance(message, dict):
            raise self.fail(number, "a message object", _kind(message), field=where)
        if not isinstance(message.get("role"), str):
            raise self.fail(number, "a string", _found(message, "role"), field=f"{where}.role")
        content = message.get("content")
        if content is not None and not isinstance(content, str | list):
            raise self.fail(number, "a string, an array of parts or null", _kind(content),
                            field=f"{where}.content")
        tool_calls = message.get("tool_calls")
        if tool_calls is None:
            return
        if not isinstance(tool_calls, list):
            raise self.fail(number, "an array or null", _kind(tool_calls), field=f"{where}.tool_calls")
        for position, call in enumerate(tool_calls):
            at = f"{where}.tool_calls[{position}]"
            if not isinstance(call, dict):
                raise self.fail(number, "a tool call object", _kind(call), field=at)
            # A tool result answers its call by this id, as a string: a number or null here
            # could never be answered, and the replay would refuse the conversation.
            if not isinstance(call.get("id"), str):
                raise self.fail(number, "a string id", _found(call, "id"), field=f"{at}.id")
            function = call.get("function")
            if not isinstance(function, dict):
                raise self.fail(number, "an object", _found(call, "function"), field=f"{at}.function")
            if not isinstance(function.get("name"), str):
                raise self.fail(number, "a string", _found(function, "name"), field=f"{at}.function.name")
            if not isinstance(function.get("arguments"), str):
                raise self.fail(number, "a string of JSON arguments", _found(function, "arguments"),
                                field=f"{at}.function.arguments")

    def timing(self, obj: dict[str, Any], number: int) -> Timing | None:
        if obj.get("timing") is None:
            return None
        timing = obj["timing"]
        if not isinstance(timing, dict):
            raise self.fail(number, "an object or null", _kind(timing), field="timing")
        for key in ("start_unix_nano", "duration_ns"):
            value = timing.get(key)
            if type(value) is not int:
                raise self.fail(number, "a non-negative integer (nanoseconds)", _found(timing, key),
                                field=f"timing.{key}")
            high = MAX_UNIX_NANO if key == "start_unix_nano" else MAX_DURATION_NS
            if not 0 <= value <= high:
                raise self.fail(number, f"an integer of nanoseconds from 0 to {high}", _size(value),
                                field=f"timing.{key}")
        if timing["start_unix_nano"] + timing["duration_ns"] > MAX_UNIX_NANO:
            raise self.fail(number, f"a call that ends by {MAX_UNIX_NANO} ns after the epoch",
                            "one that ends later", field="timing.duration_ns")
        return Timing(timing["start_unix_nano"], timing["duration_ns"])

    def ending(self, obj: dict[str, Any], number: int, calls: int) -> Ending:
        end = obj["end"]
        if not isinstance(end, dict):
            raise self.fail(number, "an object", _kind(end), field="end")
        expected = {"stop_reason": (str, "a string"), "model_calls": (int, "an integer"),
                    "transcript_sha256": (str, "a string")}
        for key, (kind, name) in expected.items():
            if type(end.get(key)) is not kind:
                raise self.fail(number, name, _found(end, key), field=f"end.{key}")
        if end["model_calls"] != calls:
            raise self.fail(number, f"{calls} (the number of calls recorded above)",
                            f"{end['model_calls']}" if 0 <= end["model_calls"] < 10**9 else "another integer",
                            field="end.model_calls")
        if not _SHA256.fullmatch(end["transcript_sha256"]):
            raise self.fail(number, "64 lowercase hex digits", _kind(end["transcript_sha256"]),
                            field="end.transcript_sha256")
        return Ending(end["stop_reason"], end["model_calls"], end["transcript_sha256"])


def _lines(source: IO[bytes], reader: _LineReader) -> Iterator[tuple[int, bytes, bool]]:
    """(number, raw bytes without the newline, terminated?) for each line, each bounded."""
    limit = _format.MAX_LINE_BYTES
    number = 0
    while True:
        raw = source.readline(limit + 1)
        if not raw:
            return
        number += 1
        terminated = raw.endswith(b"\n")
        if terminated:
            raw = raw[:-1]
        if len(raw) > limit:
            raise reader.fail(number, f"a line of at most {limit} bytes", f"a longer line ({len(raw)}+ bytes)")
        yield number, raw, terminated


def load_recording(path: Path | str, *, allow_truncated: bool = False) -> Recording:
    """Read and check a whole recording. With `allow_truncated`, a last line cut short by a
    crash is dropped (and `truncated` is set) instead of raising `TruncatedRecording`.
    The file is opened read-only; reading never changes it."""
    path = Path(path)
    # The collector is left running: the load leaves a call and its timing per line for it
    # to track (see format._Document), not the line's dicts and lists.
    with open_for_reading(path) as source:
        return _load(path, source, allow_truncated)


def _load(path: Path, source: IO[bytes], allow_truncated: bool) -> Recording:
    reader = _LineReader(path)
    header: Header | None = None
    calls: list[RecordedCall] = []
    ending: Ending | None = None
    truncated = False
    for number, raw, terminated in _lines(source, reader):
        try:
            obj, held = reader.parse(raw, number)
        except (MalformedLine, NotARecording):
            # Only an unterminated last line can be a crash artefact; anything else
            # malformed is reported as what it is.
            if terminated:
                raise
            if ending is not None:  # a recorder writes nothing after the end line: no crash left this
                raise reader.fail(number, "nothing after the end line", "another line") from None
            if number == 1:
                if raw.lstrip().startswith(b"{"):
                    raise TruncatedRecording(path, 1, 0, usable=False) from None
                raise
            if not allow_truncated:
                raise TruncatedRecording(path, number, len(calls)) from None
            truncated = True
            break
        if header is None:
            if "format" in obj:
                header = reader.header(obj)
                reader.header_model = header.model
                reader.version = header.version
                continue
            if "call" in obj:
                raise reader.fail(1, "the header line", "a call line (the header is missing)")
            if "request" in obj or "response" in obj:
                header = Header(version=LEGACY_VERSION)
            else:
                raise NotARecording(
                    path, "line 1 is neither a header nor a {request, response} line", line=1
                )
        if ending is not None:
            raise reader.fail(number, "nothing after the end line", "another line")
        legacy = header.version == LEGACY_VERSION
        if "end" in obj and not legacy:
            ending = reader.ending(obj, number, len(calls))
            continue
        calls.append(reader.call(obj, number, len(calls) + 1, legacy, held))
    if header is None:
        raise NotARecording(path, "the file is empty")
    if is_unordered(header.version):
        calls.sort(key=lambda call: call.index)  # into start order, as a replay serves them
    return Recording(path, header, calls, ending, truncated)


def load_records(path: Path | str, *, allow_truncated: bool = False) -> list[dict[str, Any]]:
    """The recorded calls as plain `{"request", "response"}` dicts, in order."""
    recording = load_recording(path, allow_truncated=allow_truncated)
    return [{"request": c.request, "response": c.response} for c in recording.calls]
