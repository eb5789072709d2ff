"""The recording format: JSON Lines, a header line, one line a model call, and a shift's end
line; versions 0 (no header, read only), 1 (a café shift), 2 (wire exchanges), 3 (an
unfinished wire recording), and 4 to 6 (versions 1 to 3 whose call line may hold only what
is new in its request, with `"extends": {...}`, a `Reference`, for the rest). Its
specification, every field, error and exit code, is docs/recording-format.md; here are its
types and their encoding.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

import orjson

FORMAT_NAME = "cafe-recording"
FORMAT_VERSION = 1
# A wire recording (cafe.wire): each call line also holds its HTTP exchange.
WIRE_VERSION = 2
# A wire recording whose call lines are in the order the calls ended, each numbered by its
# start: what a recorder leaves in PATH.partial when a call ended before an earlier one (or
# one could not be written). It is never committed: the writer puts the lines back in start
# order, under version 2, first.
UNORDERED_WIRE_VERSION = 3
LEGACY_VERSION = 0
# Versions 4, 5 and 6 are versions 1, 2 and 3 whose call lines may hold only what is new in
# their request: a request that repeats an earlier call's and adds to the end of its growing
# array (a chat's `messages`) refers to that call (`Reference`) and holds the rest.
SHARED_VERSION = 4
SHARED_WIRE_VERSION = 5
UNORDERED_SHARED_WIRE_VERSION = 6
SUPPORTED_VERSIONS = [LEGACY_VERSION, FORMAT_VERSION, WIRE_VERSION, UNORDERED_WIRE_VERSION,
                      SHARED_VERSION, SHARED_WIRE_VERSION, UNORDERED_SHARED_WIRE_VERSION]
# Each version's layout: the version it is with every request held whole.
_LAYOUTS = {SHARED_VERSION: FORMAT_VERSION, SHARED_WIRE_VERSION: WIRE_VERSION,
            UNORDERED_SHARED_WIRE_VERSION: UNORDERED_WIRE_VERSION}


def layout(version: int) -> int:
    """The version whose line layout `version` has (0 to 3): versions 4 to 6 are 1 to 3 with
    references."""
    return _LAYOUTS.get(version, version)


def is_wire(version: int) -> bool:
    """Whether a recording of this version holds HTTP exchanges (`cafe.wire`)."""
    return layout(version) >= WIRE_VERSION


def is_unordered(version: int) -> bool:
    """Whether a recording of this version has its call lines in the order the calls ended."""
    return layout(version) == UNORDERED_WIRE_VERSION


def unordered(version: int) -> int:
    """The version a recording of `version` turns into when a line leaves start order."""
    return UNORDERED_SHARED_WIRE_VERSION if version == SHARED_WIRE_VERSION else UNORDERED_WIRE_VERSION


def shares(version: int) -> bool:
    """Whether a recording of this version may hold references."""
    return version in _LAYOUTS


def sharing(version: int) -> int:
    """The version a recording of `version` (1 to 3) turns into when a line holds a reference:
    the same layout with references (4 to 6)."""
    for shared, whole in _LAYOUTS.items():
        if whole == version:
            return shared
    return version


# A request carries the whole conversation so far; 16 MiB is far beyond any real shift
# and stops a corrupt or hostile file from being parsed into memory whole.
MAX_LINE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Header:
    version: int
    harness: str | None = None
    model: str | None = None
    provider: str | None = None
    recorded_at: str | None = None
    seed: int | None = None
    clock_origin_unix_nano: int | None = None
    conversation_id: str | None = None
    script: list[str] | None = None
    decisions: list[list[Any]] | None = None
    # The shift settings a replay must run with to make the same calls.
    max_turns: int | None = None
    max_repairs: int | None = None
    temperature: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "version": self.version,
            "harness": self.harness,
            "model": self.model,
            "provider": self.provider,
            "recorded_at": self.recorded_at,
            "seed": self.seed,
            "clock_origin_unix_nano": self.clock_origin_unix_nano,
            "conversation_id": self.conversation_id,
            "script": self.script,
            "decisions": self.decisions,
            "max_turns": self.max_turns,
            "max_repairs": self.max_repairs,
            "temperature": self.temperature,
        }

    def shift_options(self) -> dict[str, Any]:
        """The recorded settings of `run_shift`, for those the header holds."""
        recorded = {"max_turns": self.max_turns, "max_repairs": self.max_repairs,
                    "temperature": self.temperature, "conversation_id": self.conversation_id}
        return {key: value for key, value in recorded.items() if value is not None}


@dataclass(frozen=True)
class Timing:
    start_unix_nano: int
    duration_ns: int


def decode_held(data: bytes) -> dict[str, Any]:
    """A new dict decoded from bytes a recording holds (see `_Document`)."""
    value: dict[str, Any] = orjson.loads(data)
    return value


class _Document:
    """A `RecordedCall` field that may hold its JSON document as the bytes orjson wrote for it,
    decoded on first read and kept, so every read gives the same dict, as a plain field would.

    A loaded recording keeps each call's request and response so: two bytes objects a call,
    which the garbage collector does not track, instead of dozens of dicts and lists that
    every later collection would walk. Only values orjson round-trips exactly (same types,
    same key order) are held as bytes; the reader keeps any other as it decoded it."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._slot = "_" + name

    @overload
    def __get__(self, call: None, owner: type) -> _Document: ...
    @overload
    def __get__(self, call: object, owner: type) -> dict[str, Any]: ...

    def __get__(self, call: object, owner: type) -> _Document | dict[str, Any]:
        if call is None:
            # No default: dataclasses asks the class for one and is told there is none.
            raise AttributeError(self._slot)
        value = getattr(call, self._slot)
        if type(value) is bytes:
            value = decode_held(value)
            object.__setattr__(call, self._slot, value)
        document: dict[str, Any] = value
        return document

    def __set__(self, call: object, value: dict[str, Any] | bytes) -> None:
        # object.__setattr__, past the frozen dataclass's refusal; the attribute is private.
        object.__setattr__(call, self._slot, value)


@dataclass(frozen=True)
class Reference:
    """A call line's `extends` (versions 4 to 6): its request is call `call`'s request with
    its growing array (`array`, a chat's `messages`) cut to the first `count` items, followed
    by the items the line holds, and with every other member the line holds in place of the
    earlier call's. `sha256` is `reference_digest` of what is taken from the earlier call."""

    call: int
    array: str
    count: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"call": self.call, "array": self.array, "count": self.count, "sha256": self.sha256}


def canonical(value: Any) -> bytes:
    """A JSON value as the digests of references read it: keys sorted, no whitespace,
    non-ASCII as UTF-8 (orjson's encoding; where orjson refuses a value, an integer beyond 64
    bits or a lone surrogate, `json`'s, lone surrogates escaped)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("ascii")


EMPTY_CHAIN = hashlib.sha256(b"").digest()


def chained(previous: bytes, item: Any) -> bytes:
    """The digest of a growing array after one more item: `sha256(previous + canonical(item))`,
    from `EMPTY_CHAIN` for the empty array. The digest after the first n items stands for
    them all, so a reference is checked by one comparison, whatever the conversation's length."""
    return hashlib.sha256(previous + canonical(item)).digest()


def reference_digest(members: dict[str, Any], chain: bytes) -> str:
    """What a reference's `sha256` holds: the digest of the earlier request's members other
    than its array (as one JSON object, `canonical`) and of its array's first `count` items
    (`chain`, their `chained` digest)."""
    return hashlib.sha256(canonical(members) + chain).hexdigest()


class Link:
    """One item of a growing array, as the digests of references read it: the digest of the
    array up to it (`format.chained`), how many items that is, and the link before it. A
    request's array is its last link; a later request that keeps its first n items extends
    the link of the n-th, so the arrays of a whole conversation share their links."""

    __slots__ = ("digest", "length", "previous")

    def __init__(self, digest: bytes, length: int, previous: Link | None) -> None:
        self.digest, self.length, self.previous = digest, length, previous

    @classmethod
    def of(cls, items: list[Any]) -> Link:
        return Link(EMPTY_CHAIN, 0, None).extended(items)

    def extended(self, items: list[Any]) -> Link:
        link = self
        for item in items:
            link = Link(chained(link.digest, item), link.length + 1, link)
        return link

    def at(self, count: int) -> Link:
        """The link of the array's first `count` items (at most `length`): walked back from
        the end, so keeping the whole array costs nothing, and dropping n items n steps."""
        link = self
        while link.length > count and link.previous is not None:
            link = link.previous
        return link


class SharedRequest:
    """What a reference to a call is checked against: the name of its request's growing
    array, its other members (whole: those it holds, and those it took from the call it
    extends), and the last link of its array."""

    __slots__ = ("array", "link", "members")

    def __init__(self, array: str, members: dict[str, Any], link: Link) -> None:
        self.array, self.members, self.link = array, members, link

    @property
    def length(self) -> int:
        return self.link.length

    def link_at(self, count: int) -> Link:
        return self.link.at(count)

    def chain_at(self, count: int) -> bytes:
        return self.link.at(count).digest


def encoded(call: RecordedCall, name: str) -> bytes | None:
    """The bytes of a call's `request` or `response` while nothing has read it yet (None once
    it is decoded: from then on the dict, which its reader may have changed, is the value; and
    None for a request that refers to an earlier call's, whose bytes are only its own part)."""
    if name == "request" and call.reference is not None:
        return None
    value = getattr(call, "_" + name)
    return value if type(value) is bytes else None


def own_request(call: RecordedCall) -> dict[str, Any]:
    """What the call's line holds of its request, a new dict: the whole request, or, for one
    that refers to an earlier call's (`reference`), only its own part."""
    value = call.__dict__["_request"]
    if type(value) is bytes:
        return decode_held(value)
    from cafe.jsondata import fresh_json

    document: dict[str, Any] = fresh_json(value)
    return document


def whole_request(call: RecordedCall) -> dict[str, Any]:
    """The request of a call, made whole as a new document (one that refers to an earlier
    call's request is not kept whole: `RecordedCall.request` keeps what this makes):
    the earlier calls' parts it takes, back to one held whole, each decoded once (so the work
    is the size of the request, whatever the number of calls between)."""
    pieces: list[list[Any]] = []  # the array items each call of the chain adds, last call first
    members: list[dict[str, Any]] = []
    current: RecordedCall = call
    needed: int | None = None  # how many of the current call's array items are taken
    array = call.reference.array if call.reference is not None else ""
    while current.reference is not None:
        reference = current.reference
        own = own_request(current)
        items = own.pop(reference.array, None)
        items = items if isinstance(items, list) else []
        if needed is not None:
            items = items[:max(needed - reference.count, 0)]
        pieces.append(items)
        members.append(own)
        needed = reference.count if needed is None else min(needed, reference.count)
        base = current.base
        if base is None:  # pragma: no cover - the reader links every reference it accepts
            raise ValueError(f"call {current.index} refers to call {reference.call}, which is not linked")
        current = base
    root = own_request(current)
    root_items = root.pop(array, None)
    whole = root
    for own in reversed(members):
        whole.update(own)
    items = list(root_items[:needed]) if isinstance(root_items, list) else []
    for added in reversed(pieces):
        items.extend(added)
    whole[array] = items
    return whole


class _Request(_Document):
    """`RecordedCall.request`: the `_Document` of a call held whole; for a call that refers to
    an earlier one's request, that request made whole on first read (`whole_request`) and kept."""

    def __get__(self, call: object, owner: type) -> Any:
        if call is None:
            raise AttributeError(self._slot)
        if getattr(call, "reference", None) is None:
            return super().__get__(call, owner)
        made = call.__dict__.get("_whole")
        if made is None:
            made = call.__dict__["_whole"] = whole_request(call)  # type: ignore[arg-type]
        return made


@dataclass(frozen=True)
class RecordedCall:
    index: int  # 1-based call number
    line: int  # 1-based line in the file
    # Dicts; a loaded recording passes them as orjson's bytes, decoded when first read.
    request: _Request = _Request()
    response: _Document = _Document()
    timing: Timing | None = None
    # The model the line names (`"model"` beside `request` in a plain file), if any.
    line_model: str | None = None
    header_model: str | None = field(default=None, compare=False)
    # Version 2: the HTTP exchange (method, target, headers, status, SSE chunks), or None.
    exchange: dict[str, Any] | None = None
    # Versions 4 to 6: the earlier call whose request this one's extends, and the call itself.
    reference: Reference | None = None
    base: RecordedCall | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Made by its constructor (`dataclasses.replace`, a caller's own), a call is given its
        # request whole, as `request` reads it: it refers to no earlier call, so the line it
        # writes holds that request whole. (The reader and the writer make their calls with
        # `loaded`, whose request is the line's own part.)
        if self.reference is not None:
            self.__dict__.update({"reference": None, "base": None})

    @property
    def model(self) -> str | None:
        """The model this call went to: the line's own `model`, else the request's, else
        the response's, else the header's (None when none of them names one)."""
        for candidate in (self.line_model, self.request.get("model"), self.response.get("model"),
                          self.header_model):
            if isinstance(candidate, str) and candidate:
                return candidate
        return None

    @classmethod
    def loaded(cls, index: int, line: int, request: dict[str, Any] | bytes, response: dict[str, Any] | bytes,
               timing: Timing | None, line_model: str | None, header_model: str | None,
               exchange: dict[str, Any] | None = None, reference: Reference | None = None,
               base: RecordedCall | None = None) -> RecordedCall:
        """The call as the reader makes it, once a line: the same object `RecordedCall(...)`
        makes, its fields set in one step rather than one frozen-dataclass assignment each
        (those took 3 of the 4 µs of making it)."""
        call = object.__new__(cls)
        call.__dict__.update({"index": index, "line": line, "_request": request, "_response": response,
                              "timing": timing, "line_model": line_model, "header_model": header_model,
                              "exchange": exchange, "reference": reference, "base": base})
        return call

    def to_json(self) -> dict[str, Any]:
        """The call's line: its request as the line holds it (with a reference, its own part)."""
        request = self.__dict__["_request"]
        if type(request) is bytes:
            request = decode_held(request)
        data: dict[str, Any] = {"call": self.index, "request": request, "response": self.response}
        if self.reference is not None:
            data["extends"] = self.reference.to_json()
        if self.timing is not None:
            data["timing"] = {
                "start_unix_nano": self.timing.start_unix_nano,
                "duration_ns": self.timing.duration_ns,
            }
        if self.exchange is not None:
            data["exchange"] = self.exchange
        return data


@dataclass(frozen=True)
class Ending:
    stop_reason: str
    model_calls: int
    transcript_sha256: str

    def to_json(self) -> dict[str, Any]:
        return {
            "end": {
                "stop_reason": self.stop_reason,
                "model_calls": self.model_calls,
                "transcript_sha256": self.transcript_sha256,
            }
        }


@dataclass(frozen=True)
class Recording:
    path: Path
    header: Header
    calls: list[RecordedCall] = field(default_factory=list)
    ending: Ending | None = None
    truncated: bool = False

    @property
    def holds_shift_calls(self) -> bool:
        """Whether each call line's `request` and `response` are a café client's call (the
        four arguments of `chat`, and its reply): every version 0 and 1 recording, and a
        version 2 one a café shift made live (its exchanges also hold the JSON bodies as
        sent and answered, `exchange.request_json`). Other version 2 lines hold the bodies
        themselves (`cafe.wire` recording any agent)."""
        if not is_wire(self.header.version):
            return True
        if not self.calls:
            return self.header.script is not None
        return "request_json" in (self.calls[0].exchange or {})

    @property
    def model(self) -> str | None:
        """The shift's model: the header's, else the first call's resolved model."""
        if self.header.model:
            return self.header.model
        return next((c.model for c in self.calls if c.model), None)
