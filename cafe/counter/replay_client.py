"""Replaying a recording: responses served strictly in order, nothing guessed.

Two invariants, each catching a different regression. Matching polices the calls that
arrive: the next recorded request must equal the incoming one (after scrubbing and the
declared normalisation), or `ReplayMismatch` names the call and the first differing path.
Exhaustion polices the calls that should have arrived: `assert_exhausted()` raises
`UnusedCalls` when recorded calls were never made.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from cafe.counter.clients.base import Message, Response, ToolCallIdCheck, build_request
from cafe.jsondata import fresh_json, json_document, plain_json, same_json
from cafe.privacy import Scrubber, structure_scrubber
from cafe.recording.diff import first_difference, summarise_request
from cafe.recording.errors import (
    RecordingError,
    RecordingExhausted,
    ReplayMismatch,
    UnusableIgnorePath,
    UnusedCalls,
)
from cafe.recording.format import (
    RecordedCall,
    Recording,
    decode_held,
    encoded,
    own_request,
    shares,
    whole_request,
)
from cafe.recording.normalise import normalise, parse_path
from cafe.recording.reader import load_recording

# Plain JSON as cafe.jsondata writes it (subclasses, dataclasses and datetimes refused), with
# keys sorted as cafe's writer sorts them (`json.dumps(sort_keys=True)`). The bytes a recording
# holds are in the file's order, so a file written with keys in another order always takes
# the document comparison: slower, same verdict.
_SORTED = (orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATACLASS
           | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_SORT_KEYS)


def _request_of(recorded: RecordedCall) -> dict[str, Any]:
    """The recorded request, decoded (or made whole, for one that extends an earlier call's)
    for this use only while the recording holds it as bytes."""
    if recorded.reference is not None:
        return whole_request(recorded)
    data = encoded(recorded, "request")
    return decode_held(data) if data is not None else recorded.request


class ReplayClient:
    def __init__(
        self,
        source: Recording | Path | str,
        *,
        ignore: Sequence[str] = (),
        scrubber: Scrubber | None = None,
    ) -> None:
        self.recording = source if isinstance(source, Recording) else load_recording(source)
        if not self.recording.holds_shift_calls:
            raise RecordingError(
                f"{self.recording.path}: it is a wire recording (format version {self.recording.header.version}): "
                "replay it by running the code that made it under cafe.wire.replay(), the pytest marker or "
                f"`cafe replay-run {self.recording.path} -- CMD` (docs/wire.md)")
        self.model = self.recording.model or "unknown"
        self.provider = self.recording.header.provider or "unknown"
        if isinstance(ignore, str):  # its characters would each be taken for a path
            raise RecordingError(f"{self.recording.path}: ignore: expected a list of field paths, found a string "
                                 "(write ignore=[PATH])")
        for declared in ignore:
            if not isinstance(declared, str):
                raise RecordingError(f"{self.recording.path}: ignore: expected a field path (a string), "
                                     f"found {type(declared).__name__}")
            try:
                parse_path(declared)
            except ValueError as error:
                raise UnusableIgnorePath(f"{self.recording.path}: {error}") from None
        self._ignore = tuple(ignore)
        self._scrubber = scrubber or Scrubber.from_environment()
        self.calls = 0
        self._check_tool_call_ids = ToolCallIdCheck()  # each message once, when first sent
        # The messages of the call served last (the objects, not copies), the recorded call it
        # matched, and that call's other arguments as recorded.
        self._served: tuple[list[Message], RecordedCall, dict[str, Any]] | None = None

    @property
    def path(self) -> Path:
        return self.recording.path

    def __repr__(self) -> str:
        return (
            f"ReplayClient(path={str(self.path)!r}, recorded={len(self.recording.calls)}, "
            f"served={self.calls})"
        )

    def _matches_verbatim(self, recorded: RecordedCall, request: dict[str, Any]) -> bool:
        """The fast path: the incoming request is the recorded one as a JSON document. Then
        scrubbing and normalising both would change nothing, since the recorded request is
        already scrubbed; only a request that differs pays for them (regexes over every
        request cost far more than the replay itself).

        A loaded recording holds the request as orjson's bytes. The incoming request written
        the same way gives the same bytes only if it is the same document, and then it is
        the same document with the same types, provided it holds nothing but plain JSON
        values (`plain_json`: orjson also writes NaN as null and an enum member as its
        value). Any other request is compared as a document, the recorded one decoded for
        that call only, so the recording stays bytes."""
        if self._ignore:
            return False
        data = encoded(recorded, "request")
        if data is None:
            return same_json(request, recorded.request)
        try:
            if orjson.dumps(request, option=_SORTED) == data and plain_json(request):
                return True
        except orjson.JSONEncodeError:
            pass
        return same_json(request, decode_held(data))

    def _matches_what_is_new(self, recorded: RecordedCall, request: dict[str, Any]) -> dict[str, Any] | None:
        """The fast path at any length of conversation: the recorded request extends the call
        served last, and the incoming conversation is the one served last grown at its end:
        the same message objects first (compared by identity, in C: nothing already served is
        serialised or scrubbed again; a message once sent is taken as sent, as
        `ToolCallIdCheck` takes it).
        Then only what is new is compared, as a document: the new messages and the
        arguments, against what the line holds and what it takes from the call it extends.
        Returns the recorded call's arguments (its members other than `messages`) when it
        matches, else None (the whole request is compared)."""
        reference, served = recorded.reference, self._served
        if reference is None or served is None or self._ignore or reference.array != "messages":
            return None
        messages = request["messages"]
        previous, matched, arguments = served
        length = len(previous)
        if (recorded.base is not matched or reference.count != length or not length or type(messages) is not list
                or len(messages) < length or not all(map(operator.is_, messages, previous))):
            return None
        own = own_request(recorded)
        added = own.pop("messages", [])
        expected = {**arguments, **own}
        incoming = {key: value for key, value in request.items() if key != "messages"}
        if not (same_json(incoming, expected) and same_json(messages[length:], added)
                and plain_json(incoming) and plain_json(messages[length:])):
            return None
        return expected

    def _served_after(self, messages: list[Message], recorded: RecordedCall,
                      arguments: dict[str, Any] | None) -> tuple[list[Message], RecordedCall, dict[str, Any]] | None:
        """What the next call's fast path compares with, once `recorded` served `messages`:
        kept only for a recording that may hold references, grown by the new messages after
        a call the fast path matched (`arguments`), else all of them."""
        if not shares(self.recording.header.version) or type(messages) is not list:
            return None
        served = self._served
        if arguments is not None and served is not None:
            previous = served[0]
            previous.extend(messages[len(previous):])
            return previous, recorded, arguments
        whole = {key: value for key, value in _request_of(recorded).items() if key != "messages"}
        return list(messages), recorded, whole

    def _quoted(self, described: str) -> str:
        """A side of a difference as the line shows it: a value it quotes, scrubbed."""
        return self._scrubber.scrub(described) if described.startswith("'") else described

    def _as_recorded(self, request: dict[str, Any]) -> dict[str, Any]:
        # The incoming request is scrubbed exactly as the recorder scrubbed the line's request.
        # A request JSON cannot write (a UUID, a set, bytes) is `NotJSON`: no recording holds one.
        scrubbed: dict[str, Any] = self._scrubber.scrub_json(json_document(request))
        return scrubbed

    def chat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        temperature: float = 0.0,
        tool_choice: Any = None,
    ) -> Response:
        self._check_tool_call_ids(messages)
        recorded_calls = self.recording.calls
        request = build_request(messages, tools, temperature, tool_choice)
        if self.calls >= len(recorded_calls):
            exhausted = RecordingExhausted(self.path, len(recorded_calls))
            exhausted.incoming_request, exhausted.served = self._as_recorded(request), self.calls
            raise exhausted
        recorded = recorded_calls[self.calls]
        arguments = self._matches_what_is_new(recorded, request)
        if arguments is None and not self._matches_verbatim(recorded, request):
            incoming = self._as_recorded(request)
            difference = first_difference(
                normalise(_request_of(recorded), self._ignore), normalise(incoming, self._ignore)
            )
            if difference is not None:
                # The line quotes protocol values (roles, ids) and names keys: the recorded side
                # is scrubbed only if cafe wrote it, so what is quoted is scrubbed here (a text's
                # length and digest, and the path's keys but for a key-shaped secret, as they are).
                keys = structure_scrubber()
                steps = tuple(keys.scrub(step) if isinstance(step, str) else step for step in difference.steps)
                mismatch = ReplayMismatch(
                    self.path, recorded.index, steps,
                    self._quoted(difference.recorded), self._quoted(difference.incoming),
                )
                mismatch.incoming_request, mismatch.served = incoming, self.calls
                raise mismatch
        self._served = self._served_after(messages, recorded, arguments)
        self.calls += 1
        data = encoded(recorded, "response")
        # A fresh copy either way: decoding the bytes makes the copy fresh_json would.
        response: Response = decode_held(data) if data is not None else fresh_json(recorded.response)
        return response

    @property
    def unused(self) -> int:
        return len(self.recording.calls) - self.calls

    def assert_exhausted(self) -> None:
        if self.unused:
            first = self.recording.calls[self.calls]
            unused = UnusedCalls(
                self.path, self.unused, first.index,
                f"line {first.line}: {structure_scrubber().scrub(summarise_request(first.request))}",
            )
            unused.served = self.calls
            raise unused

