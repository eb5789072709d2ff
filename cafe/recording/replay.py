"""Replaying a recording: responses served strictly in order, nothing guessed.

Two invariants, each catching a different regression. Matching polices the calls that
arrive: the next recorded request must equal the incoming one (after scrubbing and the
declared normalisation), or `ReplayMismatch` names the call and the first differing path.
Exhaustion polices the calls that should have arrived: `assert_exhausted()` raises
`UnusedCalls` when recorded calls were never made.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cafe.clients.base import Message, Response, build_request, check_tool_call_ids
from cafe.jsondata import fresh_json, same_json
from cafe.recording.diff import first_difference, summarise_request
from cafe.recording.errors import RecordingError, RecordingExhausted, ReplayMismatch, UnusedCalls
from cafe.recording.format import Recording
from cafe.recording.normalise import normalise, parse_path
from cafe.recording.reader import load_recording
from cafe.recording.scrub import Scrubber


class ReplayClient:
    def __init__(
        self,
        source: Recording | Path | str,
        *,
        ignore: Sequence[str] = (),
        scrubber: Scrubber | None = None,
    ) -> None:
        self.recording = source if isinstance(source, Recording) else load_recording(source)
        self.model = self.recording.model or "unknown"
        self.provider = self.recording.header.provider or "unknown"
        for declared in ignore:
            try:
                parse_path(declared)
            except ValueError as error:
                raise RecordingError(f"{self.recording.path}: {error}") from None
        self._ignore = tuple(ignore)
        self._scrubber = scrubber or Scrubber.from_environment()
        self.calls = 0

    @property
    def path(self) -> Path:
        return self.recording.path

    def __repr__(self) -> str:
        return (
            f"ReplayClient(path={str(self.path)!r}, recorded={len(self.recording.calls)}, "
            f"served={self.calls})"
        )

    def _matches_verbatim(self, index: int, request: dict[str, Any]) -> bool:
        """The fast path: the incoming request is the recorded one as a JSON document. Then
        scrubbing and normalising both would change nothing, since the recorded request is
        already scrubbed; only a request that differs pays for them (regexes over every
        request cost far more than the replay itself)."""
        return not self._ignore and same_json(request, self.recording.calls[index].request)

    def _as_recorded(self, request: dict[str, Any]) -> dict[str, Any]:
        # The incoming request is scrubbed exactly as the recorder scrubbed the line's request.
        scrubbed: dict[str, Any] = self._scrubber.scrub_json(json.loads(json.dumps(request, ensure_ascii=False)))
        return scrubbed

    def chat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        temperature: float = 0.0,
        tool_choice: Any = None,
    ) -> Response:
        check_tool_call_ids(messages)
        recorded_calls = self.recording.calls
        request = build_request(messages, tools, temperature, tool_choice)
        if self.calls >= len(recorded_calls):
            exhausted = RecordingExhausted(self.path, len(recorded_calls))
            exhausted.incoming_request, exhausted.served = self._as_recorded(request), self.calls
            raise exhausted
        recorded = recorded_calls[self.calls]
        if not self._matches_verbatim(self.calls, request):
            incoming = self._as_recorded(request)
            difference = first_difference(
                normalise(recorded.request, self._ignore), normalise(incoming, self._ignore)
            )
            if difference is not None:
                mismatch = ReplayMismatch(
                    self.path, recorded.index, difference.path, difference.recorded, difference.incoming
                )
                mismatch.incoming_request, mismatch.served = incoming, self.calls
                raise mismatch
        self.calls += 1
        response: Response = fresh_json(recorded.response)
        return response

    @property
    def unused(self) -> int:
        return len(self.recording.calls) - self.calls

    def assert_exhausted(self) -> None:
        if self.unused:
            first = self.recording.calls[self.calls]
            unused = UnusedCalls(
                self.path, self.unused, first.index,
                f"line {first.line}: {summarise_request(first.request)}",
            )
            unused.served = self.calls
            raise unused

