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

The observer never fails a call: anything it raises is caught and counted in the account
(as a listener error) when it has one.

`opentelemetry-instrument python agent.py` loads this module's `CafeDistro` and
`CafeConfigurator` (entry points in pyproject.toml): `configure()` from the `OTEL_*`
variables, set as the global providers, shut down within its bound at exit, with the
account's line on stderr. The instrumentor is the `cafe_openai` instrumentor entry point.
"""

from __future__ import annotations

import atexit
import re
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import orjson
from opentelemetry import context as otel_context
from opentelemetry import metrics as otel_metrics
from opentelemetry import trace
from opentelemetry.instrumentation.distro import BaseDistro  # type: ignore[attr-defined]
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.trace import SpanKind, Status, StatusCode

from cafe_otel import semconv as sc
from cafe_otel._metrics.listener import ChatCall, MetricsListener
from cafe_otel._spans.content import CaptureMode, capture_mode
from cafe_otel._spans.scope import our_version
from cafe_otel.agent import AGENT_TOTALS_KEY, MODEL_CALL_KEY, AgentTotals

if TYPE_CHECKING:
    from cafe.wire import CallOutcome, WireLayer, WireRequest, WireResponse
    from cafe_otel._configure import TelemetryHandle

WallClock = Callable[[], int]
MAX_BODY_BYTES = 16 * 1024 * 1024  # a JSON answer larger than this is not read for metadata
MAX_EVENT_BYTES = 1024 * 1024  # one server-sent event larger than this is not read either
MAX_CHUNK_GAPS = 100_000  # chunk timings kept for one streamed call
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


class _ChatCall:
    """The observer of one chat call: its span, from the request to the call's one end."""

    def __init__(self, observer: GenAIWireObserver, request: WireRequest, body: dict[str, Any],
                 context: otel_context.Context) -> None:
        self._observer = observer
        self._started_ns = request.started_ns
        self._attributes = request_attributes(request, body)
        self._stream = self._attributes[sc.GEN_AI_REQUEST_STREAM]
        capturing = observer.capturing
        self._messages = body.get("messages") if capturing else None
        self._tools = body.get("tools") if capturing else None
        self._start_wall = observer.wall_clock()
        totals = context.get(AGENT_TOTALS_KEY)  # the agent span this call is made under, if any
        self._totals = totals if isinstance(totals, AgentTotals) else None
        model = self._attributes.get(sc.GEN_AI_REQUEST_MODEL)
        self._name = sc.CHAT_SPAN_NAME.format(model=model) if model else sc.OP_CHAT
        # The span is made when the call ends, in one start_span with its start time and all
        # its attributes (the call's own context is its parent): nothing runs inside it that
        # could look for it, and setting the end attributes on a started span costs more.
        self._context = context
        self._status: int | None = None
        self._event_stream = False
        self._answer = _Answer()
        if capturing:
            self._answer.choices = {}
        self._pending = b""
        # Content captured: every delta is merged into the answer, so every event is decoded.
        self._decode_every = capturing
        self._head_missing: tuple[bytes, ...] = ()
        self._body: list[bytes] = []
        self._body_size = 0
        self._first_chunk_ns: int | None = None
        self._last_chunk_ns: int | None = None
        self._gaps: list[float] = []

    # --- the seam's calls -------------------------------------------------------
    def response(self, response: WireResponse) -> None:
        self._observer.guarded(self._response, response)

    def chunk(self, data: bytes, at_ns: int) -> None:
        # The one call a streamed answer makes per piece of its body: its work is inline
        # (no guard call, no helper per piece), and it only splits the events and times them;
        # an event is decoded only when it says something the span keeps (see `_event`).
        try:
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
        except Exception as error:  # never into the caller's call
            self._observer.failed(error)

    def end(self, outcome: CallOutcome) -> None:
        self._observer.guarded(self._end, outcome)

    # --- what they do -----------------------------------------------------------
    def _response(self, response: WireResponse) -> None:
        self._status = response.status
        self._event_stream = response.is_event_stream

    def _event(self, event: bytes, at_ns: int) -> None:
        if event.startswith(b"data:") and b"\n" not in event and b"\r" not in event:
            payload = event[5:].lstrip(b" ")  # one `data:` line: the usual event
        else:
            payload = b"".join(line[5:].lstrip(b" ") for line in event.splitlines() if line.startswith(b"data:"))
        if not payload or payload == b"[DONE]":
            return
        first = self._first_chunk_ns is None
        if first:
            self._first_chunk_ns = at_ns
        elif self._last_chunk_ns is not None and len(self._gaps) < MAX_CHUNK_GAPS:
            self._gaps.append((at_ns - self._last_chunk_ns) / 1e9)
        self._last_chunk_ns = at_ns
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
            answer = self._answer
            answer.read_head(document)
            answer.read_choices(document, delta=True)
            self._head_missing = answer.head_missing()

    def _read_body(self) -> None:
        if not self._body:
            return
        try:
            document = orjson.loads(b"".join(self._body))
        except orjson.JSONDecodeError:
            return
        if isinstance(document, dict):
            self._answer.read_head(document)
            self._answer.read_choices(document, delta=False)

    def _end(self, outcome: CallOutcome) -> None:
        answer = self._answer
        observer = self._observer
        status = self._status
        if not self._event_stream and (status is None or status < 400):
            self._read_body()
        found = dict(self._attributes)  # the start attributes, then the answer's
        answer.add_attributes(found)
        error_type: str | None = None
        failed = outcome.kind is observer.failed_kind
        if failed:
            error_type = outcome.error_type or "_OTHER"
        elif status is not None and status >= 400:
            error_type = str(status)
        if self._stream and self._first_chunk_ns is not None:
            found[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = (self._first_chunk_ns - self._started_ns) / 1e9
        if error_type is not None:
            found[sc.ERROR_TYPE] = error_type
        if observer.capturing and isinstance(self._messages, list):
            found.update(chat_content(self._messages, answer.response_document() if answer.choices else None,
                                      self._tools if isinstance(self._tools, list) else None))
        end_wall = self._start_wall + max(outcome.at_ns - self._started_ns, 0)
        span = observer.tracer.start_span(self._name, context=self._context, kind=SpanKind.CLIENT,
                                          attributes=found, start_time=self._start_wall)
        if self._totals is not None:
            self._totals.add_call(
                input_tokens=answer.input_tokens, output_tokens=answer.output_tokens,
                temperature=self._attributes.get(sc.GEN_AI_REQUEST_TEMPERATURE),
                finish_reasons=found.get(sc.GEN_AI_RESPONSE_FINISH_REASONS, ()),
                input_messages=found.get(sc.GEN_AI_INPUT_MESSAGES),
                output_messages=found.get(sc.GEN_AI_OUTPUT_MESSAGES))
        if error_type is not None:
            span.set_status(Status(StatusCode.ERROR))  # no description: it would be free text
            if failed:
                span.add_event(sc.EXCEPTION_EVENT_NAME, {sc.EXCEPTION_TYPE: error_type}, timestamp=end_wall)
        span.end(end_time=end_wall)
        if observer.metrics is not None:
            attributes = self._attributes
            observer.metrics.record_call(ChatCall(
                provider=attributes[sc.GEN_AI_PROVIDER_NAME], request_model=attributes.get(sc.GEN_AI_REQUEST_MODEL),
                response_model=answer.model, server_address=attributes[sc.SERVER_ADDRESS],
                server_port=attributes[sc.SERVER_PORT], error_type=error_type,
                duration_s=(outcome.at_ns - self._started_ns) / 1e9,
                input_tokens=answer.input_tokens, output_tokens=answer.output_tokens,
                time_to_first_chunk_s=found.get(sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK),
                chunk_gaps_s=self._gaps if self._stream else ()))


def chat_content(messages: list[Any], response: Mapping[str, Any] | None,
                 tools: list[Any] | None) -> dict[str, Any]:
    """The content attributes of a call heard on the wire (only with capture on)."""
    from cafe_otel._spans import mapping

    messages = [message for message in messages if isinstance(message, dict)]
    return mapping.chat_content(messages, response, [tool for tool in tools or [] if isinstance(tool, dict)])


class GenAIWireObserver:
    """A `cafe.wire.WireObserver`: every `POST .../chat/completions` becomes a chat span and
    its metrics. `tracer` makes the spans; `metrics` (optional) records the GenAI client
    metrics; `on_secret` is told each API key the requests carry, once (the pipeline keeps
    it out of every exported byte); `on_error` hears what the observer itself failed at."""

    def __init__(self, tracer: trace.Tracer, *, metrics: MetricsListener | None = None,
                 capture: CaptureMode = CaptureMode.NO_CONTENT, wall_clock: WallClock = time.time_ns,
                 on_secret: Callable[[Iterable[str]], None] | None = None,
                 on_error: Callable[[str], None] | None = None) -> None:
        self.tracer = tracer
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
            self._note_secret(request)
            body = request.json()
            if not isinstance(body, dict):
                return None
            return _ChatCall(self, request, body, context)
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
_AUTO: dict[str, TelemetryHandle] = {}
_AUTO_LOCK = threading.Lock()


def auto_configure(environ: Mapping[str, str] | None = None) -> TelemetryHandle | None:
    """What the configurator does, once a process: `configure()` from the `OTEL_*` variables
    as the global providers, its bounded shutdown and the account's line at exit. A
    configuration error is one line on stderr and no telemetry: the program still runs."""
    from cafe_otel._config.settings import TelemetryConfigError
    from cafe_otel._configure import configure

    with _AUTO_LOCK:
        if "handle" in _AUTO:
            return _AUTO["handle"]
        try:
            handle = configure(environ=environ)
        except TelemetryConfigError as error:
            print(f"cafe-otel: telemetry is off: {error}", file=sys.stderr)
            return None
        _AUTO["handle"] = handle
        atexit.register(_at_exit, handle)
        return handle


def _at_exit(handle: TelemetryHandle) -> None:
    handle.shutdown()
    if handle.enabled:
        print(f"cafe-otel: telemetry: {handle.account.summary()}", file=sys.stderr)


class CafeConfigurator:
    """The `opentelemetry_configurator` entry point `cafe_otel`: see `auto_configure`."""

    def configure(self, **kwargs: Any) -> None:
        auto_configure()


class CafeDistro(BaseDistro):  # type: ignore[misc]
    """The `opentelemetry_distro` entry point `cafe_otel`: it hands our instrumentor the
    handle the configurator built (our pipeline, not only the global provider)."""

    def _configure(self, **kwargs: Any) -> None:
        return None

    def load_instrumentor(self, entry_point: Any, **kwargs: Any) -> None:
        instrumentor = entry_point.load()
        if isinstance(instrumentor, type) and issubclass(instrumentor, OpenAIWireInstrumentor):
            handle = _AUTO.get("handle")
            if handle is not None:
                kwargs["telemetry"] = handle
        instrumentor().instrument(**kwargs)
