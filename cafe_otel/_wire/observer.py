"""`GenAIWireObserver`: every model call heard on the wire (`cafe.wire`) whose API a reading
knows (`cafe.apis`) becomes a GenAI span and its metrics, built from the request's JSON body,
the response head and the body as the caller reads it. What runs where, and why, is
`cafe_otel.instrumentation`'s docstring."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import orjson
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from cafe.apis import NO_RESPONSE, Api, CallResponse, EventSplitter, StreamReading, api_for
from cafe_otel import semconv as sc
from cafe_otel._metrics.listener import ChatCall, MetricsListener
from cafe_otel._spans.content import CaptureMode
from cafe_otel._wire.attributes import content_attributes, request_attributes, response_attributes, span_name
from cafe_otel.agent import AGENT_TOTALS_KEY, MODEL_CALL_KEY, AgentTotals

if TYPE_CHECKING:
    from cafe.wire import CallOutcome, WireRequest, WireResponse
    from cafe_otel._wire.builder import CallBuilder

WallClock = Callable[[], int]
MAX_BODY_BYTES = 16 * 1024 * 1024  # a JSON answer larger than this is not read for metadata
MAX_CHUNK_GAPS = 100_000  # chunk timings kept for one streamed call
MAX_HELD_BYTES = 4 * 1024 * 1024  # a body's pieces held for the builder; past this, read as they come
# The headers a request names its API key in: the key never leaves in any exported byte.
_KEY_HEADERS = ("api-key", "x-api-key", "x-goog-api-key")


class _BodyReader:
    """Reads an answer's body, piece by piece as the caller read it: a JSON document is kept
    to be read whole at the end; a stream's server-sent events are split and timed, and an
    event is decoded only when the API's stream reading wants it (see `StreamReading.wants`)."""

    __slots__ = ("_api", "_body", "_body_size", "_capturing", "_splitter", "_stream", "first_chunk_ns", "gaps",
                 "last_chunk_ns")

    def __init__(self, api: Api, *, event_stream: bool, capturing: bool) -> None:
        self._api = api
        self._capturing = capturing
        self._stream: StreamReading | None = api.stream(content=capturing) if event_stream else None
        self._splitter = EventSplitter() if event_stream else None
        self._body: list[bytes] = []
        self._body_size = 0
        self.first_chunk_ns: int | None = None
        self.last_chunk_ns: int | None = None
        self.gaps: list[float] = []

    def chunk(self, data: bytes, at_ns: int) -> None:
        splitter = self._splitter
        if splitter is None:
            self._body_size += len(data)
            if self._body_size <= MAX_BODY_BYTES:
                self._body.append(data)
            else:
                self._body = []
            return
        for payload in splitter.feed(data):
            self._event(payload, at_ns)

    def _event(self, payload: bytes, at_ns: int) -> None:
        if self.first_chunk_ns is None:
            self.first_chunk_ns = at_ns
        elif self.last_chunk_ns is not None and len(self.gaps) < MAX_CHUNK_GAPS:
            self.gaps.append((at_ns - self.last_chunk_ns) / 1e9)
        self.last_chunk_ns = at_ns
        stream = self._stream
        assert stream is not None  # only an event stream has events
        if not stream.wants(payload):
            return
        try:
            document = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return
        if isinstance(document, dict):
            stream.event(document)

    def result(self, *, read_body: bool) -> CallResponse:
        """What the answer says: a stream's events as read; a JSON body decoded now (only
        when `read_body`: an error's body is not the answer)."""
        if self._stream is not None:
            return self._stream.result()
        if not read_body or not self._body:
            return NO_RESPONSE
        try:
            document = orjson.loads(b"".join(self._body))
        except orjson.JSONDecodeError:
            return NO_RESPONSE
        return self._api.response(document, content=self._capturing) if isinstance(document, dict) else NO_RESPONSE


class _ModelCall:
    """One model call: what the calling thread hears of it (the request, the answer's head,
    each piece of the body with the time it was read, the outcome), and the span and
    metrics built from that when the call has ended (`build`).

    The calling thread only keeps references and times; `build` reads the request and the
    answer with the API's reading, makes the span (one `start_span` with its start time,
    its parent context and all its attributes, then `end` at the call's end time) and
    records the metrics. It runs on the handle's builder thread (`CallBuilder`) when the
    observer has one, else on the thread that ended the call. Nothing runs inside the span
    that could look for it, so making it afterwards changes nothing a caller sees but when
    it is exported."""

    __slots__ = ("_api", "_context", "_held", "_held_size", "_observer", "_outcome", "_reader", "_request",
                 "_response", "_start_wall", "_totals")

    def __init__(self, observer: GenAIWireObserver, api: Api, request: WireRequest, context: otel_context.Context,
                 totals: AgentTotals | None) -> None:
        self._observer = observer
        self._api = api
        self._request = request
        self._context = context
        self._totals = totals
        self._start_wall = observer.wall_clock()
        self._response: WireResponse | None = None
        # The body's pieces with their times, read when the span is built; past
        # MAX_HELD_BYTES they are read as they come instead (`_reader`).
        self._held: list[tuple[bytes, int]] | None = []
        self._held_size = 0
        self._reader: _BodyReader | None = None
        self._outcome: CallOutcome | None = None

    # --- the seam's calls (the calling thread) -----------------------------------
    def response(self, response: WireResponse) -> None:
        self._response = response

    def chunk(self, data: bytes, at_ns: int) -> None:
        # The one call a streamed answer makes per piece of its body: the piece and its
        # time are kept, nothing is read (see `build`).
        held = self._held
        if held is not None:
            held.append((data, at_ns))
            self._held_size += len(data)
            if self._held_size <= MAX_HELD_BYTES:
                return
        try:
            self._read(data, at_ns)
        except Exception as error:  # never into the caller's call
            self._held = None
            self._observer.failed(error)

    def end(self, outcome: CallOutcome) -> None:
        self._outcome = outcome
        builder = self._observer.builder
        if builder is not None and self._totals is None:
            builder.submit(self)
        else:  # an agent span adds this call's totals before it ends: built now
            self.build()

    # --- what is built from them -------------------------------------------------
    def _body_reader(self) -> _BodyReader:
        reader = self._reader
        if reader is None:
            response = self._response
            event_stream = response is not None and response.is_event_stream
            reader = self._reader = _BodyReader(self._api, event_stream=event_stream,
                                                capturing=self._observer.capturing)
        return reader

    def _read(self, data: bytes, at_ns: int) -> None:
        reader = self._body_reader()
        held = self._held
        if held is not None:  # too much held: read what is held, then each piece as it comes
            self._held = None
            for piece, piece_ns in held:
                reader.chunk(piece, piece_ns)
            return
        reader.chunk(data, at_ns)

    def build(self) -> None:
        """Makes the call's span and records its metrics; never raises (a failure is the
        observer's to count)."""
        try:
            self._build()
        except Exception as error:  # never into the caller's call, nor the builder's thread
            self._observer.failed(error)

    def _build(self) -> None:
        outcome = self._outcome
        if outcome is None:
            return
        observer = self._observer
        request = self._request
        body = request.json()
        if not isinstance(body, dict):
            return
        api = self._api
        asked = api.request(body, host=request.host)
        attributes = request_attributes(asked, request)
        reader = self._body_reader()
        held = self._held
        if held:
            self._held = None
            for piece, piece_ns in held:
                reader.chunk(piece, piece_ns)
        status = self._response.status if self._response is not None else None
        answer = reader.result(read_body=status is None or status < 400)
        started_ns = request.started_ns
        found = dict(attributes)  # the start attributes, then the answer's
        response_attributes(answer, found)
        error_type: str | None = None
        failed = outcome.kind is observer.failed_kind
        if failed:
            error_type = outcome.error_type or "_OTHER"
        elif status is not None and status >= 400:
            error_type = str(status)
        if asked.stream and reader.first_chunk_ns is not None:
            found[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = (reader.first_chunk_ns - started_ns) / 1e9
        if error_type is not None:
            found[sc.ERROR_TYPE] = error_type
        if observer.capturing:
            found.update(content_attributes(api.request_content(body), answer))
        end_wall = self._start_wall + max(outcome.at_ns - started_ns, 0)
        span = observer.tracer.start_span(span_name(asked), context=self._context, kind=SpanKind.CLIENT,
                                          attributes=found, start_time=self._start_wall)
        if self._totals is not None:
            self._totals.add_call(
                input_tokens=answer.usage.input_tokens, output_tokens=answer.usage.output_tokens,
                temperature=asked.temperature, finish_reasons=answer.finish_reasons,
                input_messages=found.get(sc.GEN_AI_INPUT_MESSAGES),
                output_messages=found.get(sc.GEN_AI_OUTPUT_MESSAGES))
        if error_type is not None:
            span.set_status(Status(StatusCode.ERROR))  # no description: it would be free text
            if failed:
                span.add_event(sc.EXCEPTION_EVENT_NAME, {sc.EXCEPTION_TYPE: error_type}, timestamp=end_wall)
        span.end(end_time=end_wall)
        if observer.metrics is not None:
            observer.metrics.record_call(ChatCall(
                provider=asked.provider, request_model=asked.model, response_model=answer.model,
                server_address=attributes[sc.SERVER_ADDRESS], server_port=attributes[sc.SERVER_PORT],
                error_type=error_type, duration_s=(outcome.at_ns - started_ns) / 1e9,
                input_tokens=answer.usage.input_tokens, output_tokens=answer.usage.output_tokens,
                time_to_first_chunk_s=found.get(sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK),
                chunk_gaps_s=reader.gaps if asked.stream else (), operation=asked.operation.value,
                service_tier=answer.service_tier, system_fingerprint=answer.system_fingerprint))


class GenAIWireObserver:
    """A `cafe.wire.WireObserver`: every model call whose API a reading knows (`cafe.apis`)
    becomes a GenAI span and its metrics. `tracer` makes the spans; `metrics` (optional)
    records the GenAI client metrics; `on_secret` is told each API key the requests carry, once (the pipeline keeps
    it out of every exported byte); `on_error` hears what the observer itself failed at.
    `builder` (a `CallBuilder`) builds each call's span and metrics once the call has
    ended; without one they are built on the thread that ended it, before it goes on."""

    def __init__(self, tracer: trace.Tracer, *, metrics: MetricsListener | None = None,
                 capture: CaptureMode = CaptureMode.NO_CONTENT, wall_clock: WallClock = time.time_ns,
                 on_secret: Callable[[Iterable[str]], None] | None = None,
                 on_error: Callable[[str], None] | None = None, builder: CallBuilder | None = None) -> None:
        self.tracer = tracer
        self.builder = builder
        self.metrics = metrics
        self.capture = capture
        self.capturing = capture.on_span  # read on every call: a plain attribute
        from cafe.wire import OutcomeKind  # the seam this observes: loaded with it

        self.failed_kind = OutcomeKind.FAILED
        self.wall_clock = wall_clock
        self._on_secret = on_secret
        self._on_error = on_error
        self._secrets: set[str] = set()
        self._lock = threading.Lock()

    def start(self, request: WireRequest) -> _ModelCall | None:
        api = api_for(request.method, request.path)
        if api is None:
            return None
        context = otel_context.get_current()  # read once: the call's parent, totals and mark
        if context.get(MODEL_CALL_KEY):  # a café generation: its chat span exists
            return None
        try:
            # Before anything of the call can be exported: the key is kept out of every byte.
            self._note_secret(request)
            totals = context.get(AGENT_TOTALS_KEY)  # the agent span this call is made under, if any
            return _ModelCall(self, api, request, context, totals if isinstance(totals, AgentTotals) else None)
        except Exception as error:
            self.failed(error)
            return None

    def guarded(self, action: Callable[..., None], *arguments: Any) -> None:
        try:
            action(*arguments)
        except Exception as error:  # never into the caller's call
            self.failed(error)

    def failed(self, error: Exception) -> None:
        if self._on_error is not None:
            try:
                self._on_error(f"wire observer raised {type(error).__name__}")
            except Exception:  # the account itself failing: nothing is left to tell
                return

    def _note_secret(self, request: WireRequest) -> None:
        if self._on_secret is None:
            return
        authorization = request.header("authorization") or ""
        key = authorization[7:].strip() if authorization[:7].lower() == "bearer " else ""
        for name in _KEY_HEADERS:
            key = key or (request.header(name) or "").strip()
        if not key or key in self._secrets:
            return
        with self._lock:
            if key in self._secrets:
                return
            self._secrets.add(key)
        self._on_secret((key,))
