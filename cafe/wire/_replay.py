"""`WireReplay`: the source that answers from a wire recording, never the network, whichever
client library sent the request (each library's `ReplayTransport` is one, usable as that
library's transport)."""

from __future__ import annotations

import bisect
import heapq
import json
import os
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from cafe.apis import api_for, request_summary
from cafe.jsondata import JsonPath
from cafe.privacy import MIN_SECRET_CHARS, REDACTED, Scrubber, structure_scrubber
from cafe.recording.diff import describe, first_difference
from cafe.recording.errors import (
    OtherProcessCall,
    RecordingError,
    RecordingExhausted,
    ReplayError,
    ReplayMismatch,
    StreamExhausted,
    UnusedCalls,
)
from cafe.recording.format import RecordedCall, Recording, decode_held, encoded, is_wire
from cafe.recording.normalise import normalise, parse_path
from cafe.recording.reader import load_recording
from cafe.wire import _forks
from cafe.wire._exchange import credential_values, json_object, payload, payload_bytes, request_body
from cafe.wire._multipart import described_bytes, parts_difference
from cafe.wire._recorder import recorded_target
from cafe.wire._scrub import multipart_of, scrubbed_body
from cafe.wire._telemetry import telemetry_upload
from cafe.wire._types import RecordedFailure, WireAnswer, WireRequest

_ENCODED_REDACTED = quote(REDACTED)


def checked_ignore(path: Path, ignore: Sequence[str]) -> tuple[str, ...]:
    """The declared ignore paths, each checked (`RecordingError` naming what is wrong)."""
    if isinstance(ignore, str):  # its characters would each be taken for a path
        raise RecordingError(f"{path}: ignore: expected a list of field paths, found a string (write ignore=[PATH])")
    for declared in ignore:
        if not isinstance(declared, str):
            raise RecordingError(f"{path}: ignore: expected a field path (a string), found {type(declared).__name__}")
        try:
            parse_path(declared)
        except ValueError as error:
            raise RecordingError(f"{path}: {error}") from None
    return tuple(ignore)


def _end_ns(call: RecordedCall) -> int | None:
    return None if call.timing is None else call.timing.start_unix_nano + call.timing.duration_ns


_NEVER = 2**64  # later than any recorded end (those end by 2**63 - 1)


def _window_ends(calls: Sequence[RecordedCall]) -> list[int]:
    """For each call, where the calls recorded in flight with it end: the first later
    position that starts at or after its end (or has no timing), or `len(calls)`. Made in one
    pass from the last call back, keeping the later calls each of which starts after every
    one between it and the current position (their starts grow away from it): the first that
    starts at or after an end is found among them by bisection."""
    # A call without timing starts after every end: no window reaches past it.
    starts = [_NEVER if call.timing is None else call.timing.start_unix_nano for call in calls]
    ends = [len(calls)] * len(calls)
    rising: list[int] = []  # positions, the nearest last; their starts fall towards the end
    for position in range(len(calls) - 1, -1, -1):
        end = _end_ns(calls[position])
        if end is None:
            ends[position] = position + 1
        else:
            reached = bisect.bisect_right(rising, -end, key=lambda later: -starts[later])
            if reached:
                ends[position] = rising[reached - 1]
        while rising and starts[rising[-1]] <= starts[position]:
            rising.pop()
        rising.append(position)
    return ends


def _numbers_by_value(value: Any) -> Any:
    """`value` with each float that is a whole number made an int: JSON has one number type,
    and matching takes `1.0` for `1` (never `true`)."""
    kind = type(value)
    if kind is float:
        return int(value) if value.is_integer() else value
    if kind is dict:
        return {key: _numbers_by_value(item) for key, item in value.items()}
    if kind is list:
        return [_numbers_by_value(item) for item in value]
    return value


def body_key(normalised: dict[str, Any]) -> bytes:
    """A normalised body as bytes that two bodies share whenever matching takes them for
    the same (`first_difference` finds no difference): keys sorted, numbers by value. (Equal
    values are written alike: by orjson, or where it refuses one, an integer beyond 64 bits
    or a lone surrogate, by `json`.)"""
    value = _numbers_by_value(normalised)
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return json.dumps(value, sort_keys=True).encode("ascii")


def _unserved_between(positions: deque[int], served: list[bool], first: int, end: int) -> Iterator[int]:
    for position in positions:
        if position >= end:
            return
        if position > first and not served[position]:
            yield position


class WireReplay:
    """Serves a wire recording (format version 2) to any client of any library the seam
    covers, sync or async: a `WireSource` (`answer`), the same recording answering httpx and
    httpx2 alike (the recording holds HTTP, not a library's objects).

    Strict and ordered: each request must be the next recorded one (method, path and query,
    and the whole JSON body, after scrubbing as the recorder scrubbed and without the
    declared `ignore` paths), or `ReplayMismatch` names the call and the first differing
    JSON path. Calls that were in flight together when recorded (their recorded times
    overlap, as `asyncio.gather` makes them) may arrive in any order: a request is matched
    among the unserved recorded calls that overlap the next one, by its body, so each gets
    its own recorded answer and none gets another's. A call beyond the recording is
    `RecordingExhausted`; `assert_exhausted()` raises `UnusedCalls`. The first refusal is
    kept in `failure` and repeated to every later request (an SDK's retry must not be
    matched against the next call), since an SDK may wrap it in an error of its own.

    A request that is not the next call is looked up among the overlapping ones by its
    normalised body (`body_key`), so matching N concurrent calls in any order takes work in
    proportion to N. An SDK's upload of its own telemetry (`cafe.wire._telemetry`) is
    answered as its service answers it, never matched nor counted.

    The replay belongs to the process that made it: in a child forked from it, a request is
    refused (`OtherProcessCall`) and `assert_exhausted()` leaves the check to the parent."""

    is_wire_source = True

    def __init__(self, source: Recording | Path | str, *, ignore: Sequence[str] = (),
                 scrubber: Scrubber | None = None, allow_truncated: bool = False) -> None:
        self.recording = source if isinstance(source, Recording) else load_recording(
            source, allow_truncated=allow_truncated)
        path = self.recording.path
        if not is_wire(self.recording.header.version):
            raise RecordingError(f"{path}: it holds no HTTP exchanges (format version "
                                 f"{self.recording.header.version}); replay it with `cafe replay {path}`")
        self._ignore = checked_ignore(path, ignore)
        self._scrubber = scrubber or Scrubber.from_environment()
        # Telemetry uploads that a recorder of an earlier cafe kept are no calls to make.
        self._calls = [call for call in self.recording.calls if not _is_telemetry(call)]
        self._served = [False] * len(self._calls)
        self._next = 0
        # The lookup of a request among the calls in flight with the next one, made as far as
        # a request arriving out of its recorded order needs it: the calls by normalised body,
        # and those whose body is not JSON (compared one by one).
        self._window_ends: list[int] | None = None
        self._by_body: dict[bytes, deque[int]] = {}
        self._unkeyed: deque[int] = deque()
        self._indexed = 0
        self._lock = threading.Lock()
        self._scrubbers: dict[tuple[str, ...], Scrubber] = {}
        self.served = 0
        self.failure: RecordingError | None = None
        self._process = _forks.process()

    @property
    def path(self) -> Path:
        return self.recording.path

    @property
    def unused(self) -> int:
        return len(self._calls) - self.served

    def __repr__(self) -> str:
        return f"{type(self).__name__}(path={str(self.path)!r}, recorded={len(self._calls)}, served={self.served})"

    def answer(self, request: WireRequest) -> WireAnswer:
        """The recorded answer to `request` (its body read), or the refusal raised. It never
        awaits: concurrent tasks are matched one at a time."""
        upload = telemetry_upload(request.method, request.target)
        if upload is not None:
            return upload.answer()
        return self._answer(self._take(request))

    # Matching

    def _take(self, request: WireRequest) -> RecordedCall:
        if _forks.forks != self._process:
            refused = OtherProcessCall(self.path, os.getpid(), replaying=True)
            self.failure = self.failure or refused  # this child's copy: raised again at its block's end
            raise refused
        with self._lock:
            if self.failure is not None:
                raise self.failure
            try:
                position = self._match(request)
            except ReplayError as error:
                self.failure = error
                raise
            self._served[position] = True
            self.served += 1
            while self._next < len(self._calls) and self._served[self._next]:
                self._next += 1
            return self._calls[position]

    def _scrubber_for(self, request: WireRequest) -> Scrubber:
        """The scrubber the recorder used for this request: its own credentials as literals."""
        secrets = tuple(s for s in credential_values(request.headers) if len(s) >= MIN_SECRET_CHARS)
        if not secrets:
            return self._scrubber
        known = self._scrubbers.get(secrets)
        if known is None:
            known = self._scrubbers[secrets] = self._scrubber.with_literals(secrets)
        return known

    def _match(self, request: WireRequest) -> int:
        """The position of the recorded call `request` is: the next unserved one, or else the
        first, in recorded order, of the unserved ones recorded in flight with it that it
        matches."""
        if self._next >= len(self._calls):
            exhausted = RecordingExhausted(self.path, len(self._calls))
            exhausted.served = self.served
            raise exhausted
        incoming = _Incoming(request, self._scrubber_for(request))
        first = self._next
        difference = self._difference(self._calls[first], incoming)
        if difference is None:
            return first
        if self._window_ends is None:
            self._window_ends = _window_ends(self._calls)
        end = self._window_ends[first]
        if end > first + 1:
            found = self._first_match(incoming, first, end)
            if found is not None:
                return found
        expected = self._calls[first]
        unended = self._unended_before(expected.index)
        if unended is not None:
            exhausted = RecordingExhausted(self.path, len(self._calls), unended=unended)
            exhausted.incoming_request, exhausted.served = incoming.scrubbed_body(), self.served
            exhausted.on_wire = True
            raise exhausted
        mismatch = ReplayMismatch(self.path, expected.index, *difference)
        mismatch.incoming_request, mismatch.served = incoming.scrubbed_body(), self.served
        mismatch.on_wire = True
        raise mismatch

    def _first_match(self, incoming: _Incoming, first: int, end: int) -> int | None:
        """The first unserved position after `first` and before `end` whose call `incoming`
        matches: compared only with the calls of its normalised body, and those whose body
        is not JSON."""
        self._index_until(first, end)
        groups = [self._unkeyed]
        key = self._incoming_key(incoming)
        if key is not None and key in self._by_body:
            groups.append(self._by_body[key])
        for positions in groups:
            while positions and self._served[positions[0]]:
                positions.popleft()
        candidates: Iterable[int] = heapq.merge(*(_unserved_between(positions, self._served, first, end)
                                                  for positions in groups))
        for position in candidates:
            if self._difference(self._calls[position], incoming) is None:
                return position
        return None

    def _index_until(self, first: int, end: int) -> None:
        """Put the calls up to `end` in the lookup. Those up to `first` are never needed:
        they are served, or `first` itself, which is always compared before the lookup."""
        for position in range(max(self._indexed, first + 1), end):
            key = self._recorded_key(self._calls[position])
            if key is None:
                self._unkeyed.append(position)
            else:
                self._by_body.setdefault(key, deque()).append(position)
        self._indexed = max(self._indexed, end)

    def _recorded_key(self, recorded: RecordedCall) -> bytes | None:
        """The `body_key` of a recorded call's body as `_difference` compares it, or None when
        it is compared as bytes (its body was not a JSON object)."""
        exchange = recorded.exchange or {}
        if exchange.get("request_body") is not None:
            return None
        if "request_json" in exchange:
            body = exchange.get("request_json") or {}
        else:
            held = encoded(recorded, "request")
            body = decode_held(held) if held is not None else recorded.request
        return body_key(normalise(body, self._ignore))

    def _incoming_key(self, incoming: _Incoming) -> bytes | None:
        """The `body_key` a recorded call must have to match `incoming`, or None when only a
        call compared as bytes may (an incoming body that is not a JSON object, and not empty:
        an empty one matches a call recorded with an empty JSON body, or none)."""
        if incoming.body is None:
            return body_key(normalise({}, self._ignore)) if not incoming.raw else None
        return body_key(normalise(incoming.scrubbed_body(), self._ignore))

    def _unended_before(self, number: int) -> int | None:
        """The first call number below `number` the recording holds no line for (an
        unfinished recording's call that never ended), if any."""
        expected = 1
        for call in self._calls:
            if call.index >= number:
                break
            if call.index != expected:
                return expected
            expected += 1
        return expected if expected < number else None

    def _difference(self, recorded: RecordedCall, incoming: _Incoming) -> tuple[JsonPath | str, str, str] | None:
        """Where the incoming request first differs from `recorded` (the JSON path's steps, or
        the part of the request outside its body), and both sides described; None: it matches."""
        exchange = recorded.exchange or {}
        if exchange.get("method") != incoming.method:
            return "the method", repr(exchange.get("method")), repr(incoming.method)
        # The marker may be percent-encoded in a recording's query (`%5BREDACTED%5D`): it is the
        # same marker, and the same credential.
        target = str(exchange.get("target", "")).replace(_ENCODED_REDACTED, REDACTED)
        if target != incoming.target:
            recorded_path, _, recorded_query = target.partition("?")
            incoming_path, _, incoming_query = incoming.target.partition("?")
            if recorded_path != incoming_path:
                scrub = structure_scrubber().scrub
                return "the path", repr(scrub(recorded_path)), repr(scrub(incoming_path))
            return "the query", describe(recorded_query), describe(incoming_query)
        raw_body = exchange.get("request_body")
        shift_line = "request_json" in exchange  # the line's `request` is the café's call
        if raw_body is not None or incoming.body is None:
            if raw_body is None:
                sent_json = exchange.get("request_json") if shift_line else recorded.request
                if not sent_json and not incoming.raw:
                    return None
                return "the body", described_bytes(b""), described_bytes(incoming.raw)
            return self._kept_body_difference(raw_body, exchange.get("request_headers"), incoming)
        held = None if shift_line else encoded(recorded, "request")
        if held is not None and not self._ignore and incoming.sorted_bytes() == held:
            return None
        if shift_line:
            recorded_body = exchange.get("request_json") or {}
        else:
            recorded_body = decode_held(held) if held is not None else recorded.request
        difference = first_difference(normalise(recorded_body, self._ignore),
                                      normalise(incoming.scrubbed_body(), self._ignore))
        if difference is None:
            return None
        quoted = self._scrubber.scrub
        return (difference.steps,
                quoted(difference.recorded) if difference.recorded.startswith("'") else difference.recorded,
                quoted(difference.incoming) if difference.incoming.startswith("'") else difference.incoming)

    def _kept_body_difference(self, raw_body: Any, headers: Any, incoming: _Incoming) -> tuple[str, str, str] | None:
        """How a body the recording keeps as bytes differs from the incoming one, put through
        what the writer put the recorded one through: a multipart body by its parts (its
        boundary is random), any other byte for byte."""
        recorded_type = headers.get("content-type") if isinstance(headers, dict) else None
        offered = incoming.kept_body()
        recorded_parts = multipart_of(raw_body, recorded_type if isinstance(recorded_type, str) else None)
        incoming_parts = None if offered is None else multipart_of(offered, incoming.content_type)
        if recorded_parts is not None and incoming_parts is not None:
            return parts_difference(recorded_parts, incoming_parts)
        recorded_bytes = payload_bytes(raw_body)
        incoming_bytes = b"" if offered is None else payload_bytes(offered)
        if recorded_bytes == incoming_bytes:
            return None
        return "the body", described_bytes(recorded_bytes), described_bytes(incoming_bytes)

    # Answering

    def _answer(self, recorded: RecordedCall) -> WireAnswer:
        exchange = recorded.exchange or {}
        status = exchange.get("status")
        if status is None:
            failure = str(exchange.get("failure"))
            raise RecordedFailure(failure, f"the recorded call {recorded.index} failed here ({failure})")
        headers = tuple((exchange.get("response_headers") or {}).items())
        stream = exchange.get("stream")
        if stream is not None:
            chunks = tuple(payload_bytes(chunk) for chunk in stream)
            # Read past a stream the recorded caller closed early, it raises rather than invent an end.
            end = (StreamExhausted(self.path, recorded.index, len(chunks))
                   if exchange.get("outcome") == "closed_early" else None)
            return WireAnswer(status, headers, chunks=chunks, end_error=end)
        body = exchange.get("body")
        if body is not None:
            content = payload_bytes(body)
        elif "response_json" in exchange:  # a café line: its `response` is the client's reply
            answered = exchange["response_json"]
            content = orjson.dumps(answered) if answered is not None else b""
        else:
            held = encoded(recorded, "response")
            content = held if held is not None else (orjson.dumps(recorded.response) if recorded.response else b"")
        return WireAnswer(status, headers, content=content)

    def assert_exhausted(self) -> None:
        """Raise `UnusedCalls` when recorded calls were never made."""
        if not self.unused or _forks.forks != self._process:
            return
        first = next(call for call, served in zip(self._calls, self._served, strict=True) if not served)
        exchange = first.exchange or {}
        method, where = str(exchange.get("method", "?")), str(exchange.get("target", "")).partition("?")[0]
        summary = request_summary(api_for(method, where), method, where, first.request)
        unused = UnusedCalls(self.path, self.unused, first.index,
                             f"line {first.line}: {structure_scrubber().scrub(summary)}")
        unused.served = self.served
        raise unused


def _is_telemetry(call: RecordedCall) -> bool:
    exchange = call.exchange or {}
    return telemetry_upload(str(exchange.get("method")), str(exchange.get("target", ""))) is not None


class _Incoming:
    """An incoming request as the recording would hold it: its target and a body kept as
    bytes through what the recorder and the writer put a recorded one through (the query's
    credentials replaced, then scrubbed as every string of a line is), its JSON body scrubbed
    when it is compared."""

    __slots__ = ("_kept", "_scrubbed", "_scrubber", "_sorted", "body", "content_type", "method", "raw", "target")

    def __init__(self, request: WireRequest, scrubber: Scrubber) -> None:
        self.method = request.method
        self.target = scrubber.scrub(recorded_target(request.target))
        self.raw, _ = request_body(request.body, request.header("content-encoding"))
        self.body = json_object(self.raw)
        self.content_type = request.header("content-type")
        self._scrubber = scrubber
        self._scrubbed: dict[str, Any] | None = None
        self._sorted: bytes | None = None
        self._kept: dict[str, Any] | None = None

    def kept_body(self) -> dict[str, Any] | None:
        """The body as the writer would keep it (not JSON), or None when there is none."""
        if not self.raw:
            return None
        if self._kept is None:
            self._kept = scrubbed_body(payload(self.raw), self.content_type, self._scrubber)
        return self._kept

    def sorted_bytes(self) -> bytes:
        if self._sorted is None:
            self._sorted = orjson.dumps(self.body, option=orjson.OPT_SORT_KEYS)
        return self._sorted

    def scrubbed_body(self) -> dict[str, Any]:
        if self._scrubbed is None:
            scrubbed: dict[str, Any] = self._scrubber.scrub_json(self.body or {})
            self._scrubbed = scrubbed
        return self._scrubbed
