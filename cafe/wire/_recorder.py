"""`WireRecorder`: the observer that writes each HTTP exchange as a call line (version 2, or 5
once a request extends the call before)."""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from cafe.apis import api_for, assembled
from cafe.jsondata import same_json
from cafe.privacy import MIN_SECRET_CHARS, REDACTED, Scrubber, structure_scrubber
from cafe.recording.errors import OtherProcessCall, RecordingError
from cafe.recording.format import WIRE_VERSION, Header, Timing
from cafe.recording.modes import RecordMode
from cafe.recording.writer import RecordingWriter
from cafe.wire import _forks
from cafe.wire._exchange import (
    BodyDecoder,
    credential_values,
    is_query_credential,
    json_object,
    payload,
    recorded_request_headers,
    recorded_response_headers,
    request_body,
)
from cafe.wire._telemetry import telemetry_upload
from cafe.wire._types import CallOutcome, WireRequest, WireResponse, header_value

_QUERY_PAIR = re.compile(r"([^&=]*)=([^&]*)")
# The members in which a model API's request carries its conversation, which a client resends
# whole on every call: a chat's and Anthropic's `messages`, a Responses call's `input`,
# Gemini's `contents`. The first one a request holds as an array is its growing array.
GROWING_ARRAYS = ("messages", "input", "contents")


def what_is_new(previous: dict[str, Any] | None, body: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, int]] | None:
    """When `body` is `previous` (the request of the call line written last) with its growing
    array grown at the end: what the line holds of it, the new items and the members whose
    value changed, and `extends` (the array, how many items of `previous` it keeps). None:
    the line holds the whole request (another conversation, an item changed or dropped, a
    member removed).

    The kept items are compared as JSON documents (`same_json`: `true` is not `1`), so the
    request the line makes whole is the one sent."""
    if previous is None:
        return None
    array = next((name for name in GROWING_ARRAYS if type(body.get(name)) is list), None)
    if array is None:
        return None
    items, before = body[array], previous.get(array)
    if type(before) is not list or not before or len(items) < len(before):
        return None
    if any(key not in body for key in previous) or not same_json(items[:len(before)], before):
        return None
    own = {key: value for key, value in body.items()
           if key != array and not (key in previous and same_json(value, previous[key]))}
    own[array] = items[len(before):]
    return own, (array, len(before))


def recorded_target(target: str) -> str:
    """The path and query as the recorder hands them to the writer: the value of a query
    parameter that carries a credential (`?api-key=...`, `?access_token=...`, a presigned
    URL's `X-Amz-Signature=...`, `?code=...`: `is_query_credential`) is `[REDACTED]`. The
    writer then scrubs it as every string of a line; a replay puts an incoming target through
    both (`ReplayTransport`)."""
    path, mark, query = target.partition("?")
    if not mark:
        return target

    def hide(match: re.Match[str]) -> str:
        name = match.group(1)
        return f"{name}={REDACTED}" if match.group(2) and is_query_credential(unquote(name)) else match.group(0)

    return f"{path}?{_QUERY_PAIR.sub(hide, query)}"


def exchange_line(request: WireRequest, response: WireResponse | None, chunks: list[tuple[int, bytes]],
                  outcome: CallOutcome) -> tuple[dict[str, Any] | None, dict[str, Any] | None, dict[str, Any]]:
    """The `request`, `response` and `exchange` fields of one call's line."""
    sent, sent_decoded = request_body(request.body, request.header("content-encoding"))
    body = json_object(sent)
    exchange: dict[str, Any] = {
        "method": request.method,
        "target": recorded_target(request.target),
        "request_headers": recorded_request_headers(request.headers, decoded=sent_decoded),
        "request_body": None if body is not None or not sent else payload(sent),
        "status": None if response is None else response.status,
        "response_headers": {},
        "body": None,
        "stream": None,
        "outcome": outcome.kind.value,
        "failure": None if outcome.failure is None else outcome.failure.value,
    }
    answer: dict[str, Any] | None = None
    if response is not None:
        decoder = BodyDecoder(response.header("content-encoding"))
        encoding = header_value(response.headers, "content-encoding")
        decoded = decoder.active or not encoding
        exchange["response_headers"] = recorded_response_headers(response.headers, decoded=decoder.active)
        pieces = [(offset, decoder.decode(data)) for offset, data in chunks]
        tail = decoder.flush()
        if tail:
            pieces.append((pieces[-1][0] if pieces else 0, tail))
        if response.is_event_stream:
            exchange["stream"] = [{"offset_ns": offset, **payload(data)} for offset, data in pieces if data]
            if decoded:  # the answer the API would have given unstreamed, by its reading
                answer = assembled(api_for(request.method, request.path), (data for _, data in pieces))
        else:
            whole = b"".join(data for _, data in pieces)
            answer = json_object(whole) if decoded else None
            if answer is None and whole:
                exchange["body"] = payload(whole)
    return body, answer, exchange


class WireRecorder:
    """Records every call it hears to `path`, one line a call numbered in the order
    the calls started, through `RecordingWriter`: `PATH.partial` created 0600, every line
    scrubbed (the request's own credentials too, wherever they appear), renamed into place
    by `close()`. An SDK's upload of its own telemetry (`cafe.wire._telemetry`) is not kept.

    A request that resends the conversation of the call line written last and adds to it
    (`what_is_new`) is written as what is new in it and a reference to that call, and the
    recording is then version 5: its size, and the work of scrubbing and writing it, is what
    each request adds, however long the conversation grows.

    Each line is written when its call ends, so every call that ended is on disk whatever
    happens to the program (a call that ends before an earlier one makes the partial version
    3, or 6, until `close()` puts it in start order). A call whose line cannot be written fails with
    a `RecordingError` naming it, and `close()` then raises again rather than complete a
    recording that lacks it, keeping the calls recorded in `PATH.partial`. `clock`
    (monotonic, ns) places call starts on the wall clock from `wall_clock_ns`'s reading at
    the start; durations and chunk offsets are the transport's.

    The recording belongs to the process that made the recorder: in a child forked from it, a
    call is refused (`OtherProcessCall`), and neither the calls it inherited open nor
    `close()` and `abort()` touch the file."""

    def __init__(self, path: Path | str, *, mode: RecordMode | str = RecordMode.ONCE,
                 scrubber: Scrubber | None = None, clock: Callable[[], int] = time.monotonic_ns,
                 wall_clock_ns: Callable[[], int] = time.time_ns, harness: str | None = None,
                 provider: str | None = None, model: str | None = None, conversation_id: str | None = None,
                 durable: bool = False) -> None:
        from cafe.recording.writer import _harness_version, _iso

        self._clock = clock
        self._monotonic_origin = clock()
        self.origin_unix_nano = wall_clock_ns()
        self._scrubber = scrubber or Scrubber.from_environment()
        header = Header(version=WIRE_VERSION, harness=harness or _harness_version(), model=model,
                        provider=provider, recorded_at=_iso(self.origin_unix_nano),
                        clock_origin_unix_nano=self.origin_unix_nano, conversation_id=conversation_id)
        # Absolute from the start: the recording is moved into place after the recorded code ran,
        # and that code may have changed directory.
        self.writer = RecordingWriter(Path(path).absolute(), header, mode=mode, scrubber=self._scrubber,
                                      durable=durable, share=True)
        self._lock = threading.Lock()
        self._started = 0
        self._open: dict[int, _RecordedCall] = {}
        self._unrecorded: list[RecordingError] = []  # the calls whose lines could not be written
        self._scrubbers: dict[tuple[str, ...], Scrubber] = {}
        # The call line written last and its request as sent, which the next may extend.
        self._last_sent: tuple[int, dict[str, Any]] | None = None
        self._process = _forks.process()

    @property
    def path(self) -> Path:
        return self.writer.path

    @property
    def calls(self) -> int:
        """How many calls are written."""
        return self.writer.calls

    def __repr__(self) -> str:
        return f"WireRecorder(path={str(self.path)!r}, calls={self.writer.calls})"

    def start(self, request: WireRequest) -> _RecordedCall | None:
        if _forks.forks != self._process:
            raise OtherProcessCall(self.path, os.getpid())
        if telemetry_upload(request.method, request.target) is not None:
            return None  # an SDK's upload of its own telemetry is not a model call
        with self._lock:
            self._started += 1
            call = _RecordedCall(self, self._started, request, self._unix_nano(self._clock()))
            self._open[call.number] = call
        return call

    def _unix_nano(self, reading: int) -> int:
        return self.origin_unix_nano + max(reading - self._monotonic_origin, 0)

    def _scrubber_for(self, request: WireRequest) -> Scrubber | None:
        """For a request that carries credentials, the scrubber that also replaces them
        (wherever they appear in its line), or None when it carries none."""
        secrets = tuple(s for s in credential_values(request.headers) if len(s) >= MIN_SECRET_CHARS)
        if not secrets:
            return None
        known = self._scrubbers.get(secrets)
        if known is None:
            known = self._scrubbers[secrets] = self._scrubber.with_literals(secrets)
        return known

    def _finish(self, call: _RecordedCall, outcome: CallOutcome) -> None:
        if _forks.forks != self._process:
            return  # a call the parent had open when it forked: the parent's to write
        request = call.request
        body, answer, exchange = exchange_line(request, call.head, call.chunks, outcome)
        # The writer serialises the line once and walks it only when its text may hold a
        # secret: one of the patterns' or, with this scrubber, the request's own credentials.
        scrubber = self._scrubber_for(request)
        # The start on this recorder's own clock (the transport's may be another), the
        # duration from the transport's readings.
        timing = Timing(call.start_unix_nano, max(outcome.at_ns - request.started_ns, 0))
        where = f"call {call.number}"
        with self._lock:
            self._open.pop(call.number, None)
            held, extends = body, None
            if body is not None and self._last_sent is not None:
                last_number, previous = self._last_sent
                new = what_is_new(previous, body)
                if new is not None and self.writer.extendable(call.number, new[1][0], scrubber) == last_number:
                    held, extends = new
            try:
                self.writer.write_call(held, answer, timing, exchange=exchange, scrubber=scrubber,
                                       number=call.number, where=where, extends=extends)
            except RecordingError as error:
                refusal = self._named(error, where, request)
                self._unrecorded.append(refusal)
                raise refusal from None
            self._last_sent = None if body is None else (call.number, body)

    def _named(self, error: RecordingError, where: str, request: WireRequest) -> RecordingError:
        """The writer's refusal of a call's line, naming the call by its method and path too."""
        said, prefix = str(error), f"{self.path}: {where} "
        if not said.startswith(prefix):
            return error
        path = structure_scrubber().scrub(request.path)
        return RecordingError(f"{self.path}: {where} ({request.method} {path}) {said[len(prefix):]}")

    def close(self) -> None:
        """End the calls still open as read so far (closed early), and move the recording
        into place; when a call's line could not be written, raise instead (`RecordingError`
        naming the first such call), keeping the calls recorded in `PATH.partial`."""
        if _forks.forks != self._process:
            return
        for call in list(self._open.values()):
            with contextlib.suppress(RecordingError):  # kept in `_unrecorded`, raised below
                call.end(CallOutcome.closed_early(self._clock()))
        if not self._unrecorded:
            self.writer.commit()
            return
        first, others = self._unrecorded[0], len(self._unrecorded) - 1
        more = f" (and {others} more call(s))" if others else ""
        kept = self.writer.abort()
        where = f"; the {self.writer.calls} call(s) recorded are kept in {kept}" if kept else ""
        raise RecordingError(f"{first}{more}, so the recording is incomplete and {self.path} was not "
                             f"written{where}")

    def abort(self) -> Path | None:
        """Leave the path as it was; returns where the calls recorded so far are kept."""
        if _forks.forks != self._process:
            return None
        return self.writer.abort()


class CollectedCall:
    """A call observer that keeps what it hears (the response head, each chunk with its offset
    from the request's start) and hands it on once, to `finished`, when the call ends."""

    __slots__ = ("_ended", "chunks", "head", "request")

    def __init__(self, request: WireRequest) -> None:
        self.request = request
        self.head: WireResponse | None = None
        self.chunks: list[tuple[int, bytes]] = []
        self._ended = False

    def response(self, response: WireResponse) -> None:
        self.head = response

    def chunk(self, data: bytes, at_ns: int) -> None:
        self.chunks.append((max(at_ns - self.request.started_ns, 0), data))

    def end(self, outcome: CallOutcome) -> None:
        if self._ended:
            return
        self._ended = True
        self.finished(outcome)

    def finished(self, outcome: CallOutcome) -> None:
        raise NotImplementedError


class _RecordedCall(CollectedCall):
    __slots__ = ("_recorder", "number", "start_unix_nano")

    def __init__(self, recorder: WireRecorder, number: int, request: WireRequest, start_unix_nano: int) -> None:
        super().__init__(request)
        self._recorder = recorder
        self.start_unix_nano = start_unix_nano
        self.number = number

    def finished(self, outcome: CallOutcome) -> None:
        self._recorder._finish(self, outcome)
