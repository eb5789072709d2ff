"""`GenAIWireObserver`: every model call heard on the wire (`cafe.wire`) whose API a reading
knows (`cafe.apis`) becomes a GenAI span and its metrics, built from the request's JSON body,
the response head and the body as the caller reads it. What runs where, and why, is
`cafe_otel.instrumentation`'s docstring."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import orjson
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry._logs import Logger, SeverityNumber
from opentelemetry.trace import SpanKind, Status, StatusCode

from cafe.apis import (
    NO_RESPONSE,
    Api,
    CallRequest,
    CallResponse,
    EventSplitter,
    RequestContent,
    StreamReading,
    api_for,
    request_head,
)
from cafe.wire import FailureKind
from cafe_otel import semconv as sc
from cafe_otel._metrics.listener import ChatCall, MetricsListener
from cafe_otel._spans.content import CaptureMode
from cafe_otel._spans.lazy_span import LazySpan
from cafe_otel._wire.attributes import (
    carries_content,
    content_attributes,
    content_parts,
    request_attributes,
    response_attributes,
    span_name,
)
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
# The OpenAI and Anthropic SDKs (Stainless-made) number each attempt of a call in this header,
# and retry a timeout, a transport failure, 408, 409, 429 and 5xx (or what `x-should-retry`
# says) after waiting `retry-after-ms`/`retry-after` (up to MAX_RETRY_AFTER_S) or at most
# MAX_RETRY_DELAY_S.
RETRY_COUNT_HEADER = "x-stainless-retry-count"
MAX_RETRY_DELAY_S = 8.0
MAX_RETRY_AFTER_S = 120.0
RETRY_SLACK_S = 2.0  # past the SDK's wait, before a call still waiting for its retry is ended
_RETRIED_FAILURES = frozenset({FailureKind.TIMEOUT, FailureKind.CONNECT, FailureKind.READ, FailureKind.WRITE,
                               FailureKind.PROTOCOL, FailureKind.TRANSPORT})


def _learned_span_key() -> str:
    """The context key the API keeps the current span under, asked of the API: an attempt's
    context is then one dictionary made with every value it holds."""
    (key,) = trace.set_span_in_context(trace.INVALID_SPAN, otel_context.Context())
    return key


SPAN_KEY = _learned_span_key()
_OPEN, _WAITING, _ENDED = "open", "waiting for a retry", "ended"


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


def _retry_count(request: WireRequest) -> int | None:
    """The attempt's number the SDK sends (`x-stainless-retry-count`: 0 for the first try,
    1 for the first retry, ...), or None when the request carries none."""
    value = request.header(RETRY_COUNT_HEADER)
    return int(value) if value is not None and value.isdigit() and len(value) <= 4 else None


def _retry_wait(response: WireResponse | None, outcome: CallOutcome, failed_kind: object) -> float | None:
    """How long the SDK may wait before retrying an attempt that ended so, as the OpenAI and
    Anthropic SDKs decide it; None when they never retry it."""
    if outcome.kind is failed_kind:
        return MAX_RETRY_DELAY_S if outcome.failure in _RETRIED_FAILURES else None
    if response is None or response.status < 400:
        return None
    advice = response.header("x-should-retry")
    if advice == "false":
        return None
    if advice != "true" and response.status not in (408, 409, 429) and response.status < 500:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = response.header(name)
        if value is None:
            continue
        try:
            after = float(value) / divisor
        except ValueError:
            continue
        if after > MAX_RETRY_AFTER_S:
            return None  # the SDKs do not retry past their longest wait
        return after if after > 0 else MAX_RETRY_DELAY_S
    return MAX_RETRY_DELAY_S


class _Attempt:
    """One HTTP attempt of a model call: what the calling thread hears of it (the request, the
    answer's head, each piece of the body with the time it was read, the outcome).

    The calling thread only keeps references and times, and, from `start` until the answer's
    head, keeps its operation's span current (`_Operation`), so that what runs inside the HTTP
    call (an HTTP client's instrumentation) starts its spans under it."""

    __slots__ = ("_held", "_held_size", "_reader", "_token", "head", "looked_at", "operation", "outcome",
                 "request")

    def __init__(self, operation: _Operation, request: WireRequest, *, current: bool = True) -> None:
        self.operation = operation
        self.request = request
        self.head: WireResponse | None = None  # the answer's status and headers
        # The body's pieces with their times, read when the span is built; past
        # MAX_HELD_BYTES they are read as they come instead (`_reader`).
        self._held: list[tuple[bytes, int]] | None = []
        self._held_size = 0
        self._reader: _BodyReader | None = None
        self.outcome: CallOutcome | None = None
        self.looked_at = False  # something made a span under the operation's during this attempt
        self._token: object | None = None
        if current:
            operation.attached = self
            self._token = otel_context.attach(otel_context.Context({**operation.context, SPAN_KEY: operation}))

    def _detach(self) -> None:
        token = self._token
        if token is not None:
            self._token = None
            if self.operation.attached is self:
                self.operation.attached = None
            otel_context.detach(token)  # type: ignore[arg-type]

    # --- the seam's calls (the calling thread) -----------------------------------
    def response(self, response: WireResponse) -> None:
        self._detach()  # the HTTP call is over: only its body is left to read
        self.head = response

    def chunk(self, data: bytes, at_ns: int) -> None:
        # The one call a streamed answer makes per piece of its body: the piece and its
        # time are kept, nothing is read (see `_Operation.build`).
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
            self.operation.observer.failed(error)

    def end(self, outcome: CallOutcome) -> None:
        self._detach()
        self.outcome = outcome
        self.operation.attempt_ended(self)

    # --- what is read from them ---------------------------------------------------
    def body_reader(self) -> _BodyReader:
        reader = self._reader
        if reader is None:
            head = self.head
            event_stream = head is not None and head.is_event_stream
            operation = self.operation
            reader = self._reader = _BodyReader(operation.api, event_stream=event_stream,
                                                capturing=operation.observer.reading_content)
        held = self._held
        if held:
            self._held = None
            for piece, piece_ns in held:
                reader.chunk(piece, piece_ns)
        return reader

    def _read(self, data: bytes, at_ns: int) -> None:
        reader = self._reader
        if reader is None or self._held:  # too much held: read what is held, then each piece as it comes
            self.body_reader()
            self._held = None
            return
        reader.chunk(data, at_ns)

    def forget_body(self) -> None:
        self._held = None
        self._reader = None


class _Operation(LazySpan):
    """One model call as the caller waited for it: its first attempt and every retry the SDK
    made of it (told by the SDK's own `x-stainless-retry-count`, see `GenAIWireObserver.start`),
    and the span and metrics built from them once the last attempt has ended.

    While an attempt's HTTP call runs, this is the current span (a `LazySpan`): nobody looking,
    the span is made once the call has ended, in one `start_span` with its start time, its
    parent context and all its attributes, then `end` at the call's end time; if anything
    looks (an instrumented HTTP client starting its span), the real span is made there and
    then, with the start it would have had, and the rest is added to it at the end. The span
    is the same either way.

    `build` runs on the handle's builder thread (`CallBuilder`) when the observer has one,
    else on the thread that ended the call. An attempt the SDK may retry (a 429, a 5xx, a
    timeout, as the SDK decides) leaves the operation waiting for its retry: the retry
    continues it, and when none comes within the SDK's longest wait (or at a flush) it is
    built as the last attempt left it."""

    __slots__ = ("api", "asked", "attached", "attempts", "context", "observer", "span", "start_attributes",
                 "start_wall", "started_ns", "state", "totals")

    def __init__(self, observer: GenAIWireObserver, api: Api, request: WireRequest, context: otel_context.Context,
                 totals: AgentTotals | None) -> None:
        self.observer = observer
        self.api = api
        self.context = context
        self.totals = totals
        self.start_wall = observer.wall_clock()
        self.started_ns = request.started_ns
        self.attempts: list[_Attempt] = []
        self.attached: _Attempt | None = None  # the attempt whose HTTP call runs now
        self.span: trace.Span | None = None  # made when something looked, or at the build
        self.asked: CallRequest | None = None
        self.start_attributes: dict[str, Any] | None = None
        self.state = _OPEN

    def attempt(self, request: WireRequest, *, current: bool = True) -> _Attempt:
        attempt = _Attempt(self, request, current=current)
        self.attempts.append(attempt)
        return attempt

    # --- the stand-in current span -------------------------------------------------
    def _make(self) -> trace.Span:
        span = self.span
        if span is None:
            with self.observer.lock:
                span = self.span
                if span is None:
                    span = self.span = self._start_span()
        attached = self.attached
        if attached is not None:
            attached.looked_at = True
        return span

    def _read_request(self) -> dict[str, Any] | None:
        """The start attributes (what samplers see), read once; None for a body that is no
        JSON object (no span is made of it)."""
        if self.start_attributes is None:
            request = self.attempts[0].request
            # The parameters only: the conversation is decoded when content is read, if ever.
            body = request_head(request.body, self.api.request_keys)
            if body is None:
                return None
            self.asked = self.api.request(body, host=request.host)
            self.start_attributes = request_attributes(self.asked, request)
        return self.start_attributes

    def _start_span(self) -> trace.Span:
        attributes = self._read_request()
        if attributes is None or self.asked is None:
            return trace.INVALID_SPAN
        return self.observer.tracer.start_span(span_name(self.asked), context=self.context, kind=SpanKind.CLIENT,
                                               attributes=attributes, start_time=self.start_wall)

    # --- how it ends ----------------------------------------------------------------
    def continued_by(self, request: WireRequest) -> bool:
        """Whether `request` is the SDK's retry of this call's last attempt (then it is this
        call's next attempt, and the call waits no longer)."""
        if self.state is not _WAITING:
            return False
        last = self.attempts[-1].request
        count = _retry_count(request)
        if (count is None or count != (_retry_count(last) or 0) + 1 or request.target != last.target
                or request.method != last.method or request.host != last.host or request.port != last.port):
            return False
        with self.observer.lock:
            if self.state is not _WAITING:
                return False
            self.state = _OPEN
        return True

    def attempt_ended(self, attempt: _Attempt) -> None:
        observer = self.observer
        outcome = attempt.outcome
        assert outcome is not None  # set before this is called
        wait = None
        if _retry_count(attempt.request) is not None:  # an SDK that counts its retries
            wait = _retry_wait(attempt.head, outcome, observer.failed_kind)
        if wait is not None:
            with observer.lock:
                self.state = _WAITING
            observer.awaiting_retry(self)
            observer.later(wait + RETRY_SLACK_S, self._waited, len(self.attempts))
            return
        self.state = _ENDED
        builder = observer.builder
        if builder is not None and self.totals is None:
            builder.submit(self)
        else:  # an agent span adds this call's totals before it ends: built now
            self.build()

    def _waited(self, attempts: int) -> None:
        """No retry came in time (or a flush asked): the call ended with its last attempt."""
        with self.observer.lock:
            if self.state is not _WAITING or len(self.attempts) != attempts:
                return
            self.state = _ENDED
        self.build()

    def build(self) -> None:
        """Makes the call's span and records its metrics; never raises (a failure is the
        observer's to count)."""
        try:
            self._build()
        except Exception as error:  # never into the caller's call, nor the builder's thread
            self.observer.failed(error)
        finally:
            for attempt in self.attempts:
                attempt.forget_body()

    def _build(self) -> None:
        attempts = self.attempts
        last = attempts[-1]
        outcome = last.outcome
        if outcome is None:
            return
        observer = self.observer
        attributes = self._read_request()
        asked = self.asked
        if attributes is None or asked is None:
            return
        api = self.api
        reader = last.body_reader()
        status = last.head.status if last.head is not None else None
        answer = reader.result(read_body=status is None or status < 400)
        started_ns = self.started_ns
        found = dict(attributes)  # the start attributes, then the answer's
        response_attributes(answer, found)
        error_type = _error_type(last, observer.failed_kind)
        if error_type is None and answer.error_type is not None:  # failed after its head (a stream's error event)
            error_type = answer.error_type
        if asked.stream and reader.first_chunk_ns is not None:
            found[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = (reader.first_chunk_ns - started_ns) / 1e9
        if error_type is not None:
            found[sc.ERROR_TYPE] = error_type
        said = None
        if observer.reading_content and carries_content(asked):  # 1.41.1's embeddings span has none
            body = attempts[0].request.json()
            if isinstance(body, dict):
                said = api.request_content(body)
                if observer.capturing:
                    found.update(content_attributes(said, answer))
        end_wall = self._wall(outcome.at_ns)
        with observer.lock:
            span = self.span
            if span is None:
                span = self.span = observer.tracer.start_span(
                    span_name(asked), context=self.context, kind=SpanKind.CLIENT, attributes=found,
                    start_time=self.start_wall)
            elif span is trace.INVALID_SPAN:
                return
            else:  # made while the call ran: what the answer adds, now
                span.set_attributes(found)
        if self.totals is not None:
            self.totals.add_call(
                input_tokens=answer.usage.input_tokens, output_tokens=answer.usage.output_tokens,
                temperature=asked.temperature, finish_reasons=answer.finish_reasons,
                input_messages=found.get(sc.GEN_AI_INPUT_MESSAGES),
                output_messages=found.get(sc.GEN_AI_OUTPUT_MESSAGES))
        if len(attempts) > 1:
            self._attempt_spans(span, attributes)
        if error_type is not None:
            span.set_status(Status(StatusCode.ERROR))  # no description: it would be free text
            if outcome.kind is observer.failed_kind:
                span.add_event(sc.EXCEPTION_EVENT_NAME, {sc.EXCEPTION_TYPE: error_type}, timestamp=end_wall)
        span.end(end_time=end_wall)
        if observer.event_logger is not None and carries_content(asked):  # an inference's event only
            self._emit_event(span, found, said, answer, end_wall)
        if observer.metrics is not None:
            observer.metrics.record_call(ChatCall(
                provider=asked.provider, request_model=asked.model, response_model=answer.model,
                server_address=attributes[sc.SERVER_ADDRESS], server_port=attributes[sc.SERVER_PORT],
                error_type=error_type, duration_s=(outcome.at_ns - started_ns) / 1e9,
                input_tokens=answer.usage.input_tokens, output_tokens=answer.usage.output_tokens,
                time_to_first_chunk_s=found.get(sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK),
                chunk_gaps_s=reader.gaps if asked.stream else (), operation=asked.operation.value,
                service_tier=answer.service_tier, system_fingerprint=answer.system_fingerprint))

    def _emit_event(self, span: trace.Span, found: dict[str, Any], said: RequestContent | None,
                    answer: CallResponse, end_wall: int) -> None:
        """1.41.1's `gen_ai.client.inference.operation.details`: a log record in the call's
        span context, at the call's end, with the span's metadata and, captured for the
        event, the content structured as the conventions give it (message parts, not JSON
        strings)."""
        attributes = {key: value for key, value in found.items() if key not in sc.CONTENT_ATTRIBUTES}
        if said is not None and self.observer.capture.on_event:
            attributes.update(content_parts(said, answer))
        logger = self.observer.event_logger
        assert logger is not None  # asked before this is called
        logger.emit(timestamp=end_wall, context=trace.set_span_in_context(span, self.context),
                    severity_number=SeverityNumber.INFO, event_name=sc.CONTENT_EVENT_NAME,
                    attributes=attributes)

    def _wall(self, at_ns: int) -> int:
        """A reading of the seam's monotonic clock on the wall clock of the call's start."""
        return self.start_wall + max(at_ns - self.started_ns, 0)

    def _attempt_spans(self, span: trace.Span, attributes: dict[str, Any]) -> None:
        """Each attempt of a retried call, visible once: as the spans made under the call's
        during its HTTP call (an HTTP client's instrumentation), or, when nothing made one,
        as an HTTP client span of its own under the call's span."""
        context = trace.set_span_in_context(span, self.context)
        tracer = self.observer.tracer
        failed_kind = self.observer.failed_kind
        for number, attempt in enumerate(self.attempts):
            if attempt.looked_at or attempt.outcome is None:
                continue
            request = attempt.request
            found: dict[str, Any] = {sc.HTTP_REQUEST_METHOD: request.method,
                                     sc.SERVER_ADDRESS: attributes[sc.SERVER_ADDRESS],
                                     sc.SERVER_PORT: attributes[sc.SERVER_PORT], sc.URL_SCHEME: request.scheme}
            if number:
                found[sc.HTTP_REQUEST_RESEND_COUNT] = number
            if attempt.head is not None:
                found[sc.HTTP_RESPONSE_STATUS_CODE] = attempt.head.status
            error_type = _error_type(attempt, failed_kind)
            if error_type is not None:
                found[sc.ERROR_TYPE] = error_type
            child = tracer.start_span(request.method, context=context, kind=SpanKind.CLIENT, attributes=found,
                                      start_time=self._wall(request.started_ns))
            if error_type is not None:
                child.set_status(Status(StatusCode.ERROR))
            child.end(end_time=self._wall(attempt.outcome.at_ns))

    def __repr__(self) -> str:
        return f"_Operation({len(self.attempts)} attempt(s))"


def _error_type(attempt: _Attempt, failed_kind: object) -> str | None:
    """`error.type` of an attempt: the failure's qualified class, or the status of an error answer."""
    outcome = attempt.outcome
    if outcome is not None and outcome.kind is failed_kind:
        return outcome.error_type or "_OTHER"
    status = attempt.head.status if attempt.head is not None else None
    return str(status) if status is not None and status >= 400 else None


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
                 on_error: Callable[[str], None] | None = None, builder: CallBuilder | None = None,
                 event_logger: Logger | None = None) -> None:
        self.tracer = tracer
        self.event_logger = event_logger  # the content event's, when capture sends content there
        self.builder = builder
        self.metrics = metrics
        self.capture = capture
        self.capturing = capture.on_span  # content on the span; read on every call: a plain attribute
        # Content read from the call at all: for the span, or for the content event.
        self.reading_content = capture.on_span or (capture.on_event and event_logger is not None)
        from cafe.wire import OutcomeKind  # the seam this observes: loaded with it

        self.failed_kind = OutcomeKind.FAILED
        self.wall_clock = wall_clock
        self._on_secret = on_secret
        self._on_error = on_error
        self._secrets: set[str] = set()
        self.lock = threading.Lock()
        self._timer: CallBuilder | None = None  # waits for retries when there is no builder
        # The call of this calling context (thread or task) whose last attempt the SDK may
        # retry: its retry, sent from the same context, continues it.
        self._waiting: ContextVar[_Operation | None] = ContextVar(f"cafe_otel_retry_{id(self)}", default=None)

    def start(self, request: WireRequest) -> _Attempt | None:
        api = api_for(request.method, request.path)
        if api is None:
            return None
        context = otel_context.get_current()  # read once: the call's parent, totals and mark
        if context.get(MODEL_CALL_KEY):  # a café generation: its chat span exists
            return None
        current = context.get(SPAN_KEY)
        # Another observer of ours hears this same HTTP call (two handles instrumented): its
        # span stays the current one, and this one's is its sibling. Only one attempt sets
        # the context, so the seam's end of the call restores it whatever the observers' order.
        stacked = False
        if isinstance(current, _Operation) and current.attached is not None:
            context, stacked = current.context, True
        try:
            # Before anything of the call can be exported: the key is kept out of every byte.
            self._note_secret(request)
            waiting = self._waiting.get()
            if waiting is not None and waiting.continued_by(request):
                return waiting.attempt(request, current=not stacked)
            totals = context.get(AGENT_TOTALS_KEY)  # the agent span this call is made under, if any
            operation = _Operation(self, api, request, context, totals if isinstance(totals, AgentTotals) else None)
            return operation.attempt(request, current=not stacked)
        except Exception as error:
            self.failed(error)
            return None

    def awaiting_retry(self, operation: _Operation) -> None:
        """`operation` waits for the SDK's retry, which the same calling context sends."""
        self._waiting.set(operation)

    def later(self, delay: float, action: Callable[[int], None], argument: int) -> None:
        """`action(argument)` after `delay` seconds, on the builder's thread (or a timer's
        of our own when there is no builder), or at the next flush."""
        timer = self.builder
        if timer is None:
            with self.lock:
                if self._timer is None:
                    from cafe_otel._wire.builder import CallBuilder

                    self._timer = CallBuilder()
                timer = self._timer
        timer.later(delay, lambda: self.guarded(action, argument))

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
        with self.lock:
            if key in self._secrets:
                return
            self._secrets.add(key)
        self._on_secret((key,))
