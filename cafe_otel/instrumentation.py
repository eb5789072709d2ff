"""GenAI telemetry for any agent that calls a model through the `openai` SDK, with no code change.

`OpenAIWireInstrumentor` installs one observer (`GenAIWireObserver`) on the wire seam
(`cafe.wire`): the same interception recording and replay use, so the three stack. The
observer reads the wire, never the SDK's Python types: the request's JSON body, the
response head, and the body as the caller reads it (a JSON document, or server-sent events
for a streamed call). Each `POST .../chat/completions` becomes one `chat {model}` CLIENT
span on the pinned 1.41.1 schema URL, and the GenAI client metrics (duration and token
usage; time to first chunk and time per output chunk for a streamed call).

One span per HTTP attempt: a call the SDK retries shows each attempt, each with its own
`error.type`. The span ends exactly once however the call ends (read to its end, closed
early, dropped to the garbage collector unclosed, or failed), because the seam promises one
`end` per call.

`error.type` names the failure's kind: the HTTP status for an answer of 400 or more
(`429`, `500`), the qualified exception class for a transport failure
(`httpx2.ReadTimeout`, `httpx2.ConnectError`, `asyncio.exceptions.CancelledError`).

What runs where: on the calling thread, only what must happen there (the parent context
read when the request is sent, the API key noted so that it never leaves, the wall clock,
references to the request, the response head and each piece of the body with its time, and
the outcome). The span and the metrics are built from those once the call has ended: under
a `configure()` handle, on the handle's one builder thread (`CallBuilder`), drained by
`force_flush`, `shutdown`, every metrics collection and the process's exit; under any other
provider, and for a call made under an agent span (which adds up its calls' totals before
it ends), on the thread that ended the call, before it goes on.

The observer never fails a call: anything it raises is caught and counted in the account
(as a listener error) when it has one.

`opentelemetry-instrument python agent.py` loads this module's `CafeDistro` and
`CafeConfigurator` (entry points in pyproject.toml): `configure()` from the `OTEL_*`
variables, set as the global providers, shut down within its bound at exit, with the
account's line on stderr. The instrumentor is the `cafe_openai` instrumentor entry point.
"""

from __future__ import annotations

import atexit
import queue
import re
import sys
import threading
import time
import weakref
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import orjson
from opentelemetry import context as otel_context
from opentelemetry import metrics as otel_metrics
from opentelemetry import trace
from opentelemetry.instrumentation.distro import BaseDistro  # type: ignore[attr-defined]
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.trace import SpanKind, Status, StatusCode

# First of ours: the SDK imported through the guard against a span limit it refuses on import.
import cafe_otel._config.sdk_import  # noqa: F401
from cafe_otel import semconv as sc
from cafe_otel._forks import ChildHook
from cafe_otel._metrics.listener import ChatCall, MetricsListener
from cafe_otel._spans.content import CaptureMode, capture_mode
from cafe_otel._spans.scope import our_version
from cafe_otel.agent import AGENT_TOTALS_KEY, MODEL_CALL_KEY, AgentTotals

if TYPE_CHECKING:
    from cafe.wire import CallOutcome, WireLayer, WireRequest, WireResponse
    from cafe_otel._configure import TelemetryHandle
    from cafe_otel._privacy.logs import ExporterLogCapture

WallClock = Callable[[], int]
MAX_BODY_BYTES = 16 * 1024 * 1024  # a JSON answer larger than this is not read for metadata
MAX_EVENT_BYTES = 1024 * 1024  # one server-sent event larger than this is not read either
MAX_CHUNK_GAPS = 100_000  # chunk timings kept for one streamed call
MAX_HELD_BYTES = 4 * 1024 * 1024  # a body's pieces held for the builder; past this, read as they come
MAX_QUEUED_CALLS = 512  # calls waiting for the builder's thread; past this, built by their caller
_CHAT_PATH_SUFFIX = "/chat/completions"
_EVENT_ENDS = (b"\r\n\r\n", b"\n\n", b"\r\r")
# (the key as it appears in an event, the `_Answer` attribute, the JSON field)
_HEAD_FIELDS = ((b'"id"', "id", "id"), (b'"model"', "model", "model"),
                (b'"system_fingerprint"', "fingerprint", "system_fingerprint"),
                (b'"service_tier"', "tier", "service_tier"))
# An event that sets a finish reason (a string, not null) or carries the usage (an object):
# a key's closing quote is never inside a JSON string (a quote there is escaped), so an
# event's text cannot fake one; a false match only costs a decode.
_WANTED_IN_EVENT = re.compile(rb'"(?:finish_reason"\s*:\s*"|usage"\s*:\s*\{)')


def _split_events(pending: bytes) -> tuple[list[bytes], bytes]:
    """The complete server-sent events in `pending` (ended by a blank line, in any of the
    three line-end styles), and what is left of it."""
    events: list[bytes] = []
    while True:
        end, size = -1, 0
        for separator in _EVENT_ENDS:
            found = pending.find(separator)
            if found != -1 and (end == -1 or found < end):
                end, size = found, len(separator)
        if end == -1:
            return events, pending
        events.append(pending[:end])
        pending = pending[end + size:]


def provider_of(host: str) -> str:
    """The `gen_ai.provider.name` of a chat-completions server: Azure's by its host name,
    OpenAI's wire format otherwise (an OpenAI-compatible server included)."""
    return "azure.ai.openai" if host.endswith(".openai.azure.com") else sc.PROVIDER_OPENAI


def _number(value: Any) -> float | None:
    return float(value) if type(value) in (int, float) else None


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def _output_type(response_format: Any) -> str | None:
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind in ("json_object", "json_schema"):
        return "json"
    return "text" if kind == "text" else None


def request_attributes(request: WireRequest, body: Mapping[str, Any]) -> dict[str, Any]:
    """The start attributes of a chat call: what samplers should see, and every request
    parameter the 1.41.1 conventions define, when the request sets it."""
    model = body.get("model")
    found: dict[str, Any] = {
        sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
        sc.GEN_AI_PROVIDER_NAME: provider_of(request.host),
        sc.OPENAI_API_TYPE: sc.API_TYPE_CHAT_COMPLETIONS,
    }
    if isinstance(model, str):
        found[sc.GEN_AI_REQUEST_MODEL] = model
    max_tokens = _int(body.get("max_completion_tokens"))
    if max_tokens is None:
        max_tokens = _int(body.get("max_tokens"))
    numbers = ((sc.GEN_AI_REQUEST_TEMPERATURE, "temperature"), (sc.GEN_AI_REQUEST_TOP_P, "top_p"),
               (sc.GEN_AI_REQUEST_FREQUENCY_PENALTY, "frequency_penalty"),
               (sc.GEN_AI_REQUEST_PRESENCE_PENALTY, "presence_penalty"))
    if max_tokens is not None:
        found[sc.GEN_AI_REQUEST_MAX_TOKENS] = max_tokens
    for key, field in numbers:
        number = _number(body.get(field))
        if number is not None:
            found[key] = number
    stop = body.get("stop")
    if isinstance(stop, str):
        found[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = (stop,)
    elif isinstance(stop, list) and stop and all(isinstance(item, str) for item in stop):
        found[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = tuple(stop)
    seed = _int(body.get("seed"))
    if seed is not None:
        found[sc.GEN_AI_REQUEST_SEED] = seed
    choices = _int(body.get("n"))
    if choices is not None and choices != 1:  # the spec: only when it is not 1
        found[sc.GEN_AI_REQUEST_CHOICE_COUNT] = choices
    found[sc.GEN_AI_REQUEST_STREAM] = body.get("stream") is True
    output_type = _output_type(body.get("response_format"))
    if output_type is not None:
        found[sc.GEN_AI_OUTPUT_TYPE] = output_type
    tier = body.get("service_tier")
    if isinstance(tier, str):
        found[sc.OPENAI_REQUEST_SERVICE_TIER] = tier
    found[sc.SERVER_ADDRESS] = request.host
    port = request.port if request.port is not None else (443 if request.scheme == "https" else 80)
    found[sc.SERVER_PORT] = port
    return found


class _Answer:
    """What a chat answer says, gathered from its JSON document or from its stream's chunks."""

    __slots__ = (
        "cached_tokens",
        "choices",
        "fingerprint",
        "finish",
        "id",
        "input_tokens",
        "model",
        "output_tokens",
        "reasoning_tokens",
        "tier",
    )

    def __init__(self) -> None:
        self.id: str | None = None
        self.model: str | None = None
        self.fingerprint: str | None = None
        self.tier: str | None = None
        self.finish: dict[int, str] = {}
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.cached_tokens: int | None = None
        self.reasoning_tokens: int | None = None
        # index -> the assistant message put together (kept only when content is captured)
        self.choices: dict[int, dict[str, Any]] | None = None

    def read_head(self, document: Mapping[str, Any]) -> None:
        # Field by field, not a loop over names: it runs for every decoded document.
        get = document.get
        if self.id is None and isinstance(value := get("id"), str):
            self.id = value
        if self.model is None and isinstance(value := get("model"), str):
            self.model = value
        if self.fingerprint is None and isinstance(value := get("system_fingerprint"), str):
            self.fingerprint = value
        if self.tier is None and isinstance(value := get("service_tier"), str):
            self.tier = value
        usage = get("usage")
        if isinstance(usage, dict):
            self.input_tokens = _int(usage.get("prompt_tokens"))
            self.output_tokens = _int(usage.get("completion_tokens"))
            details = usage.get("prompt_tokens_details")
            if isinstance(details, dict):
                self.cached_tokens = _int(details.get("cached_tokens"))
            details = usage.get("completion_tokens_details")
            if isinstance(details, dict):
                self.reasoning_tokens = _int(details.get("reasoning_tokens"))

    def head_missing(self) -> tuple[bytes, ...]:
        """The JSON keys (quoted, as bytes) of the head fields not known yet."""
        return tuple(key for key, attribute, _ in _HEAD_FIELDS if getattr(self, attribute) is None)

    def read_choices(self, document: Mapping[str, Any], *, delta: bool) -> None:
        choices = document.get("choices")
        if not isinstance(choices, list):
            return
        for position, choice in enumerate(choices):
            if not isinstance(choice, dict):
                continue
            index = choice.get("index")
            index = index if type(index) is int else position
            reason = choice.get("finish_reason")
            if isinstance(reason, str):
                self.finish[index] = reason
            if self.choices is not None:
                part = choice.get("delta" if delta else "message")
                if isinstance(part, dict):
                    self._merge(index, part, delta=delta)

    def _merge(self, index: int, part: Mapping[str, Any], *, delta: bool) -> None:
        assert self.choices is not None
        message = self.choices.setdefault(index, {"role": "assistant"})
        if not delta:
            message.update(part)
            return
        if isinstance(part.get("role"), str):
            message["role"] = part["role"]
        if isinstance(part.get("content"), str):
            message["content"] = message.get("content", "") + part["content"]
        for call in part.get("tool_calls") or []:
            if not isinstance(call, dict):
                continue
            calls: list[dict[str, Any]] = message.setdefault("tool_calls", [])
            at = call.get("index")
            position: int = at if type(at) is int else len(calls)
            while len(calls) <= position:
                calls.append({"id": None, "type": "function", "function": {"name": None, "arguments": ""}})
            known = calls[position]
            if isinstance(call.get("id"), str):
                known["id"] = call["id"]
            function = call.get("function") or {}
            if isinstance(function.get("name"), str):
                known["function"]["name"] = function["name"]
            if isinstance(function.get("arguments"), str):
                known["function"]["arguments"] += function["arguments"]

    def add_attributes(self, found: dict[str, Any]) -> None:
        """Adds the span's end attributes (those the answer set) to `found`."""
        if self.id is not None:
            found[sc.GEN_AI_RESPONSE_ID] = self.id
        if self.model is not None:
            found[sc.GEN_AI_RESPONSE_MODEL] = self.model
        if self.fingerprint is not None:
            found[sc.OPENAI_RESPONSE_SYSTEM_FINGERPRINT] = self.fingerprint
        if self.tier is not None:
            found[sc.OPENAI_RESPONSE_SERVICE_TIER] = self.tier
        if self.input_tokens is not None:
            found[sc.GEN_AI_USAGE_INPUT_TOKENS] = self.input_tokens
        if self.output_tokens is not None:
            found[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = self.output_tokens
        if self.cached_tokens is not None:
            found[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = self.cached_tokens
        if self.reasoning_tokens is not None:
            found[sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = self.reasoning_tokens
        finish = self.finish
        if finish:
            found[sc.GEN_AI_RESPONSE_FINISH_REASONS] = (tuple(finish.values()) if len(finish) == 1
                                                        else tuple(finish[index] for index in sorted(finish)))

    def response_document(self) -> dict[str, Any]:
        """The answer as a chat-completions document, for the content attributes."""
        choices = self.choices or {}
        return {"choices": [{"index": index, "message": choices[index], "finish_reason": self.finish.get(index)}
                            for index in sorted(choices)]}


class _BodyReader:
    """Reads a chat answer's body, piece by piece as the caller read it: a JSON document is
    kept to be decoded at the end; a stream's server-sent events are split and timed, and
    an event is decoded only when it says something the span keeps (see `_event`)."""

    __slots__ = ("_body", "_body_size", "_decode_every", "_event_stream", "_head_missing", "_pending",
                 "answer", "first_chunk_ns", "gaps", "last_chunk_ns")

    def __init__(self, *, event_stream: bool, capturing: bool) -> None:
        self._event_stream = event_stream
        self.answer = _Answer()
        if capturing:
            self.answer.choices = {}
        self._pending = b""
        # Content captured: every delta is merged into the answer, so every event is decoded.
        self._decode_every = capturing
        self._head_missing: tuple[bytes, ...] = ()
        self._body: list[bytes] = []
        self._body_size = 0
        self.first_chunk_ns: int | None = None
        self.last_chunk_ns: int | None = None
        self.gaps: list[float] = []

    def chunk(self, data: bytes, at_ns: int) -> None:
        if not self._event_stream:
            self._body_size += len(data)
            if self._body_size <= MAX_BODY_BYTES:
                self._body.append(data)
            else:
                self._body = []
            return
        pending = self._pending + data if self._pending else data
        if b"\r" in pending:  # CR or CRLF line ends: the general splitter
            events, pending = _split_events(pending)
        else:
            events = pending.split(b"\n\n")
            pending = events.pop()
        for event in events:
            self._event(event, at_ns)
        self._pending = pending if len(pending) <= MAX_EVENT_BYTES else b""

    def _event(self, event: bytes, at_ns: int) -> None:
        if event.startswith(b"data:") and b"\n" not in event and b"\r" not in event:
            payload = event[5:].lstrip(b" ")  # one `data:` line: the usual event
        else:
            payload = b"".join(line[5:].lstrip(b" ") for line in event.splitlines() if line.startswith(b"data:"))
        if not payload or payload == b"[DONE]":
            return
        first = self.first_chunk_ns is None
        if first:
            self.first_chunk_ns = at_ns
        elif self.last_chunk_ns is not None and len(self.gaps) < MAX_CHUNK_GAPS:
            self.gaps.append((at_ns - self.last_chunk_ns) / 1e9)
        self.last_chunk_ns = at_ns
        # With content off, the span needs the answer's head (from the first event, or a
        # later one naming a field still unknown), its finish reasons and its usage: the
        # events in between (the words, the argument pieces) are timed, never decoded.
        if not (first or self._decode_every or _WANTED_IN_EVENT.search(payload) is not None
                or (self._head_missing and any(key in payload for key in self._head_missing))):
            return
        try:
            document = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return
        if isinstance(document, dict):
            answer = self.answer
            answer.read_head(document)
            answer.read_choices(document, delta=True)
            self._head_missing = answer.head_missing()

    def read_body(self) -> None:
        """Decodes a JSON answer's body (a stream's events are read as they come)."""
        if self._event_stream or not self._body:
            return
        try:
            document = orjson.loads(b"".join(self._body))
        except orjson.JSONDecodeError:
            return
        if isinstance(document, dict):
            self.answer.read_head(document)
            self.answer.read_choices(document, delta=False)


class _ChatCall:
    """One chat call: what the calling thread hears of it (the request, the answer's head,
    each piece of the body with the time it was read, the outcome), and the span and
    metrics built from that when the call has ended (`build`).

    The calling thread only keeps references and times; `build` decodes the request and
    the answer, makes the span (one `start_span` with its start time, its parent context
    and all its attributes, then `end` at the call's end time) and records the metrics. It
    runs on the handle's builder thread (`CallBuilder`) when the observer has one, else on
    the thread that ended the call. Nothing runs inside the span that could look for it,
    so making it afterwards changes nothing a caller sees but when it is exported."""

    __slots__ = ("_context", "_held", "_held_size", "_observer", "_outcome", "_reader", "_request", "_response",
                 "_start_wall", "_totals")

    def __init__(self, observer: GenAIWireObserver, request: WireRequest, context: otel_context.Context,
                 totals: AgentTotals | None) -> None:
        self._observer = observer
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
            reader = self._reader = _BodyReader(event_stream=response is not None and response.is_event_stream,
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
        attributes = request_attributes(request, body)
        stream = attributes[sc.GEN_AI_REQUEST_STREAM]
        reader = self._body_reader()
        held = self._held
        if held:
            self._held = None
            for piece, piece_ns in held:
                reader.chunk(piece, piece_ns)
        status = self._response.status if self._response is not None else None
        if status is None or status < 400:
            reader.read_body()
        answer = reader.answer
        started_ns = request.started_ns
        found = dict(attributes)  # the start attributes, then the answer's
        answer.add_attributes(found)
        error_type: str | None = None
        failed = outcome.kind is observer.failed_kind
        if failed:
            error_type = outcome.error_type or "_OTHER"
        elif status is not None and status >= 400:
            error_type = str(status)
        if stream and reader.first_chunk_ns is not None:
            found[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = (reader.first_chunk_ns - started_ns) / 1e9
        if error_type is not None:
            found[sc.ERROR_TYPE] = error_type
        if observer.capturing:
            messages, tools = body.get("messages"), body.get("tools")
            if isinstance(messages, list):
                found.update(chat_content(messages, answer.response_document() if answer.choices else None,
                                          tools if isinstance(tools, list) else None))
        model = attributes.get(sc.GEN_AI_REQUEST_MODEL)
        name = sc.CHAT_SPAN_NAME.format(model=model) if model else sc.OP_CHAT
        end_wall = self._start_wall + max(outcome.at_ns - started_ns, 0)
        span = observer.tracer.start_span(name, context=self._context, kind=SpanKind.CLIENT,
                                          attributes=found, start_time=self._start_wall)
        if self._totals is not None:
            self._totals.add_call(
                input_tokens=answer.input_tokens, output_tokens=answer.output_tokens,
                temperature=attributes.get(sc.GEN_AI_REQUEST_TEMPERATURE),
                finish_reasons=found.get(sc.GEN_AI_RESPONSE_FINISH_REASONS, ()),
                input_messages=found.get(sc.GEN_AI_INPUT_MESSAGES),
                output_messages=found.get(sc.GEN_AI_OUTPUT_MESSAGES))
        if error_type is not None:
            span.set_status(Status(StatusCode.ERROR))  # no description: it would be free text
            if failed:
                span.add_event(sc.EXCEPTION_EVENT_NAME, {sc.EXCEPTION_TYPE: error_type}, timestamp=end_wall)
        span.end(end_time=end_wall)
        if observer.metrics is not None:
            observer.metrics.record_call(ChatCall(
                provider=attributes[sc.GEN_AI_PROVIDER_NAME], request_model=model,
                response_model=answer.model, server_address=attributes[sc.SERVER_ADDRESS],
                server_port=attributes[sc.SERVER_PORT], error_type=error_type,
                duration_s=(outcome.at_ns - started_ns) / 1e9,
                input_tokens=answer.input_tokens, output_tokens=answer.output_tokens,
                time_to_first_chunk_s=found.get(sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK),
                chunk_gaps_s=reader.gaps if stream else ()))


def chat_content(messages: list[Any], response: Mapping[str, Any] | None,
                 tools: list[Any] | None) -> dict[str, Any]:
    """The content attributes of a call heard on the wire (only with capture on)."""
    from cafe_otel._spans import mapping

    messages = [message for message in messages if isinstance(message, dict)]
    return mapping.chat_content(messages, response, [tool for tool in tools or [] if isinstance(tool, dict)])


class Buildable(Protocol):
    """What a `CallBuilder` builds: an ended call (`_ChatCall`)."""

    def build(self) -> None:
        """Makes what the call reports; never raises."""


class _Stop:
    """Tells the builder's thread to end (put by `CallBuilder.close`)."""


_STOP = _Stop()
_BUILDERS: weakref.WeakSet[CallBuilder] = weakref.WeakSet()


class CallBuilder:
    """One daemon thread that builds the spans and metrics of the calls handed to it, in
    the order they ended, so that the calling thread pays only for handing each over.

    A handle of `configure()` makes one for its wire observers (`TelemetryHandle.wire_observer`),
    and drains it before anything reads what it builds: `force_flush`, `shutdown`, every
    metrics collection, and the process's exit (an exit hook that runs before the
    providers' own). Each call handed over is built exactly once: by the thread, or by
    whoever drains, or by the caller itself when `limit` calls are already waiting (never
    dropped), or after `close` (then on the provider as it is, shut down or not)."""

    def __init__(self, *, limit: int = MAX_QUEUED_CALLS, exit_timeout: float = 5.0) -> None:
        self._queue: queue.SimpleQueue[Buildable | threading.Event | _Stop] = queue.SimpleQueue()
        self._limit = limit
        self._worker: threading.Thread | None = None
        self._starting = threading.Lock()
        self._closed = False
        _FORKS.watch()
        _BUILDERS.add(self)
        # Registered after the providers' own exit hooks, so it runs before them (atexit
        # runs the last registered first): what is still queued reaches their processors.
        atexit.register(_drain_at_exit, weakref.ref(self), exit_timeout)

    def submit(self, call: Buildable) -> None:
        """Hands `call` over to be built (never raises)."""
        if self._closed or self._queue.qsize() >= self._limit:
            call.build()  # closed, or the thread is behind: built here rather than dropped
            return
        if self._worker is None:
            self._start()
        self._queue.put(call)
        if self._closed:  # closed meanwhile: the thread may be gone, so nothing is left behind
            self._build_queued()

    def _start(self) -> None:
        with self._starting:
            if self._worker is None:
                worker = threading.Thread(target=self._run, name="cafe-otel-call-builder", daemon=True)
                worker.start()
                self._worker = worker

    def _run(self) -> None:
        get = self._queue.get
        while True:
            item = get()
            if isinstance(item, threading.Event):
                item.set()  # a drain waits for everything put before it
            elif isinstance(item, _Stop):
                self._build_queued()
                return
            else:
                item.build()

    def _build_queued(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, threading.Event):
                item.set()
            elif not isinstance(item, _Stop):
                item.build()

    def drain(self, timeout: float = 5.0) -> bool:
        """Builds every call handed over before this one, waiting at most `timeout` seconds
        for the thread; what is still queued then is built here. False when the thread
        was still building a call at the bound (that call ends on its own, once)."""
        worker = self._worker
        finished = True
        if not self._closed and worker is not None and worker is not threading.current_thread() and worker.is_alive():
            reached = threading.Event()
            self._queue.put(reached)
            finished = reached.wait(max(timeout, 0.0))
        self._build_queued()
        return finished

    def close(self, timeout: float = 5.0) -> bool:
        """Drains, then stops the thread: calls ending afterwards are built where they end."""
        drained = self.drain(timeout)
        self._closed = True
        if self._worker is not None:
            self._queue.put(_STOP)
        return drained

    def _forget_thread(self) -> None:
        # In a forked child: the parent's thread is not there, and what the parent had
        # queued is the parent's to build (built twice, it would be exported twice).
        self._queue = queue.SimpleQueue()
        self._worker = None
        self._starting = threading.Lock()


def _drain_at_exit(builder: weakref.ref[CallBuilder], timeout: float) -> None:
    found = builder()
    if found is not None:
        found.close(timeout)


def _forget_threads_in_child() -> None:
    for builder in list(_BUILDERS):
        builder._forget_thread()


_FORKS = ChildHook(_forget_threads_in_child)  # registered by the first builder, not on import


class GenAIWireObserver:
    """A `cafe.wire.WireObserver`: every `POST .../chat/completions` becomes a chat span and
    its metrics. `tracer` makes the spans; `metrics` (optional) records the GenAI client
    metrics; `on_secret` is told each API key the requests carry, once (the pipeline keeps
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

    def start(self, request: WireRequest) -> _ChatCall | None:
        if request.method != "POST" or not request.path.endswith(_CHAT_PATH_SUFFIX):
            return None
        context = otel_context.get_current()  # read once: the call's parent, totals and mark
        if context.get(MODEL_CALL_KEY):  # a café generation: its chat span exists
            return None
        try:
            # Before anything of the call can be exported: the key is kept out of every byte.
            self._note_secret(request)
            totals = context.get(AGENT_TOTALS_KEY)  # the agent span this call is made under, if any
            return _ChatCall(self, request, context, totals if isinstance(totals, AgentTotals) else None)
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
        key = key or (request.header("api-key") or "").strip()
        if not key or key in self._secrets:
            return
        with self._lock:
            if key in self._secrets:
                return
            self._secrets.add(key)
        self._on_secret((key,))


def observer_for(handle: TelemetryHandle | None = None, *,
                 tracer_provider: trace.TracerProvider | None = None,
                 meter_provider: otel_metrics.MeterProvider | None = None,
                 capture_content: CaptureMode | str | bool | None = None,
                 environ: Mapping[str, str] | None = None,
                 wall_clock: WallClock = time.time_ns) -> GenAIWireObserver | None:
    """The observer that reports through `handle` (its provider, metrics, account and
    secrets), or through the given or global providers when there is no handle. None when
    the handle is disabled (`OTEL_SDK_DISABLED=true`)."""
    if handle is not None:
        return handle.wire_observer(wall_clock=wall_clock)
    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    tracer = provider.get_tracer(sc.INSTRUMENTATION_NAME, our_version(), schema_url=sc.SCHEMA_URL)
    meters = meter_provider if meter_provider is not None else otel_metrics.get_meter_provider()
    return GenAIWireObserver(tracer, metrics=MetricsListener(meters), capture=capture_mode(capture_content, environ),
                             wall_clock=wall_clock)


class OpenAIWireInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Instruments every `openai` SDK call in the process, sync, async and streamed, on the
    wire seam. `instrument()` takes the usual `tracer_provider` and `meter_provider`, or
    `telemetry=` a `cafe_otel.configure()` handle; with none, the handle that set the global
    providers, else the global providers themselves."""

    _layer: WireLayer | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("openai >= 1.40",)

    def _instrument(self, **kwargs: Any) -> None:
        import cafe.wire as wire
        from cafe_otel._configure import global_handle

        handle: TelemetryHandle | None = kwargs.get("telemetry")
        if handle is None and kwargs.get("tracer_provider") is None:
            handle = global_handle()
        observer = observer_for(handle, tracer_provider=kwargs.get("tracer_provider"),
                                meter_provider=kwargs.get("meter_provider"),
                                capture_content=kwargs.get("capture_content"))
        if observer is not None:
            self._layer = wire.install(wire.WireLayer((observer,)))

    def _uninstrument(self, **kwargs: Any) -> None:
        import cafe.wire as wire

        if self._layer is not None:
            wire.uninstall(self._layer)
            self._layer = None


# --- zero-code: `opentelemetry-instrument python agent.py` ---------------------------------
# What `opentelemetry-instrument` (`opentelemetry.instrumentation.auto_instrumentation`) runs,
# in this order: our distro's `configure`, then the configurator named by
# OTEL_PYTHON_CONFIGURATOR (any one when unset: ours), then each instrumentor through the
# distro. Its one line on stderr is ours: the exporters', the SDK's and gRPC's log records are
# held from the distro on (redacted as they are made; the last failure's kind joins the line;
# `CAFE_DEBUG=1` shows each), and any failure to configure is "telemetry is off".
CONFIGURATOR_NAME = "cafe_otel"  # our `opentelemetry_configurator` entry point
_PREFIX = "cafe-otel"


class _ZeroCode:
    """One process's zero-code state: the handle, or why telemetry is off, and the held logs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.handle: TelemetryHandle | None = None
        self.off = False  # telemetry is off (its line was printed): nothing to instrument
        self.logs: ExporterLogCapture | None = None  # holding the loggers' records

    def hold_logs(self, *, debug: bool) -> None:
        if self.logs is not None:
            return
        from cafe_otel._privacy.logs import ExporterLogCapture, redact_records

        self.logs = ExporterLogCapture(redact_records(), debug=debug, propagate=True,
                                       prefix=f"{_PREFIX}: debug").__enter__()

    def telemetry_off(self, why: str) -> None:
        from cafe_otel._privacy.logs import redact_records

        self.off = True
        print(f"{_PREFIX}: telemetry is off: {redact_records()(why)}", file=sys.stderr)


_ZERO_CODE = _ZeroCode()


def auto_configure(environ: Mapping[str, str] | None = None) -> TelemetryHandle | None:
    """What the configurator does, once a process: `configure()` from the `OTEL_*` variables
    as the global providers, its bounded shutdown and the account's line at exit. Any failure
    to configure (a setting's named error, or whatever the SDK raised) is one line on stderr
    and no telemetry: the program still runs."""
    from cafe_otel._config import resolve_launcher
    from cafe_otel._config.settings import TelemetryConfigError
    from cafe_otel._configure import configure

    state = _ZERO_CODE
    with state.lock:
        if state.handle is not None or state.off:
            return state.handle
        state.hold_logs(debug=resolve_launcher(environ).debug)
        try:
            handle = configure(environ=environ)
        except TelemetryConfigError as error:
            state.telemetry_off(str(error))
            return None
        except Exception as error:  # the SDK's own, whatever it is: its text may quote a value
            state.telemetry_off(f"the OpenTelemetry SDK could not be configured ({type(error).__name__})")
            return None
        state.handle = handle
        atexit.register(_at_exit, handle)
        return handle


def _at_exit(handle: TelemetryHandle) -> None:
    from cafe_otel._privacy.logs import redact_records, report_line

    try:
        handle.shutdown()
    except Exception as error:  # the report is still printed: shutting down is bounded, not guaranteed
        handle.account.note_error(f"shutdown raised {type(error).__name__}")
    if handle.enabled:
        print(report_line(f"{_PREFIX}: telemetry: {handle.account.summary()}", _ZERO_CODE.logs,
                          dropped=bool(handle.account.dropped), redact=redact_records()), file=sys.stderr)


def _installed_configurators() -> list[str]:
    from importlib.metadata import entry_points

    return sorted({entry.name for entry in entry_points(group="opentelemetry_configurator")})


class CafeConfigurator:
    """The `opentelemetry_configurator` entry point `cafe_otel`: see `auto_configure`."""

    def configure(self, **kwargs: Any) -> None:
        auto_configure()


class CafeDistro(BaseDistro):  # type: ignore[misc]
    """The `opentelemetry_distro` entry point `cafe_otel`: it holds the loggers' records from
    the start, says when OTEL_PYTHON_CONFIGURATOR keeps every configurator (ours included)
    from loading, and hands our instrumentor the handle the configurator built (our pipeline,
    not only the global provider)."""

    def _configure(self, **kwargs: Any) -> None:
        from cafe_otel._config import resolve_launcher
        from cafe_otel._config.variables import OTEL_PYTHON_CONFIGURATOR

        launcher = resolve_launcher()
        chosen = launcher.configurator
        if chosen is not None and chosen != CONFIGURATOR_NAME:
            installed = _installed_configurators()
            if chosen in installed:
                return None  # another configurator, chosen on purpose: its pipeline, its output
            _ZERO_CODE.hold_logs(debug=launcher.debug)  # the loader's own warning, quoting the value
            with _ZERO_CODE.lock:
                what = ("is empty, and opentelemetry-instrument then loads no configurator" if not chosen.strip()
                        else f"names no installed configurator (the value is not shown; installed: "
                             f"{', '.join(installed) or 'none'})")
                _ZERO_CODE.telemetry_off(f"{OTEL_PYTHON_CONFIGURATOR} {what}; unset it, or set it to "
                                         f"{CONFIGURATOR_NAME}")
            return None
        _ZERO_CODE.hold_logs(debug=launcher.debug)
        return None

    def load_instrumentor(self, entry_point: Any, **kwargs: Any) -> None:
        instrumentor = entry_point.load()
        if isinstance(instrumentor, type) and issubclass(instrumentor, OpenAIWireInstrumentor):
            if _ZERO_CODE.off:
                return None  # telemetry is off: nothing to report through
            handle = _ZERO_CODE.handle
            if handle is not None:
                kwargs["telemetry"] = handle
        instrumentor().instrument(**kwargs)
