"""The recording format: JSON Lines, a header line, one line a model call, and a shift's end
line; versions 0 (no header, read only), 1 (a café shift), 2 (wire exchanges) and 3 (an
unfinished wire recording). Its specification, every field, error and exit code, is
docs/recording-format.md; here are its types and their encoding.
"""

from __future__ import annotations

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
SUPPORTED_VERSIONS = [LEGACY_VERSION, FORMAT_VERSION, WIRE_VERSION, UNORDERED_WIRE_VERSION]
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


def encoded(call: RecordedCall, name: str) -> bytes | None:
    """The bytes of a call's `request` or `response` while nothing has read it yet (None once
    it is decoded: from then on the dict, which its reader may have changed, is the value)."""
    value = getattr(call, "_" + name)
    return value if type(value) is bytes else None


@dataclass(frozen=True)
class RecordedCall:
    index: int  # 1-based call number
    line: int  # 1-based line in the file
    # Dicts; a loaded recording passes them as orjson's bytes, decoded when first read.
    request: _Document = _Document()
    response: _Document = _Document()
    timing: Timing | None = None
    # The model the line names (`"model"` beside `request` in a plain file), if any.
    line_model: str | None = None
    header_model: str | None = field(default=None, compare=False)
    # Version 2: the HTTP exchange (method, target, headers, status, SSE chunks), or None.
    exchange: dict[str, Any] | None = None

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
               exchange: dict[str, Any] | None = None) -> RecordedCall:
        """The call as the reader makes it, once a line: the same object `RecordedCall(...)`
        makes, its fields set in one step rather than one frozen-dataclass assignment each
        (those took 3 of the 4 µs of making it)."""
        call = object.__new__(cls)
        call.__dict__.update({"index": index, "line": line, "_request": request, "_response": response,
                              "timing": timing, "line_model": line_model, "header_model": header_model,
                              "exchange": exchange})
        return call

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"call": self.index, "request": self.request, "response": self.response}
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
        if self.header.version < WIRE_VERSION:
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
