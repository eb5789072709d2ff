"""`MetricsListener`: GenAI client metrics and the shift's own counters, from cafe's events.

GenAI metrics, as the pinned semantic conventions 1.41.1 define them (checked against the
v1.41.1 tag of open-telemetry/semantic-conventions: `model/gen-ai/metrics.yaml` for names,
instruments, units and requirement levels; `docs/gen-ai/gen-ai-metrics.md` for the
"SHOULD be specified with ExplicitBucketBoundaries of [...]" lists, lines 70 and 179):

- `gen_ai.client.token.usage`: histogram, unit `{token}`, one record per token type
  (`gen_ai.token.type` = `input` | `output`), only when the response reports the count
  (the spec: otherwise it MUST NOT be reported). Boundaries `TOKEN_USAGE_BUCKETS`.
- `gen_ai.client.operation.duration`: histogram, unit `s`, one record per model call,
  `error.type` when the call raised. Boundaries `DURATION_BUCKETS`.
- `gen_ai.client.operation.time_to_first_chunk` and `gen_ai.client.operation.time_per_output_chunk`:
  histograms, unit `s`, streamed calls only (the spec: SHOULD NOT be reported otherwise), the
  duration's boundaries (gen-ai-metrics.md lines 291 and 392). Recorded for calls heard on the
  wire (`record_call`, `cafe_otel.instrumentation`).

Both carry `gen_ai.operation.name` and `gen_ai.provider.name` (required),
`gen_ai.request.model` (conditionally required: if available), `gen_ai.response.model` and
`server.address` (recommended), `server.port` (conditionally required: if `server.address`
is set, so only with it).

Ours, in the `cafe.` namespace, all counters: `cafe.shifts` by `cafe.stop_reason` (or
`error.type` for a shift that raised), `cafe.tool.executions` by `gen_ai.tool.name` (made safe:
an unknown name is `unknown_tool`) and `cafe.tool.status`, `cafe.tickets.fired`,
`cafe.consent.decisions` by `cafe.consent.outcome`, and `cafe.repairs.used`.

Metadata only, bounded cardinality: every attribute value is an enum member, a model or
provider name, a tool label or an endpoint. No conversation id, response id, call id,
ticket number or free text ever becomes a metric attribute. The model and server name
a reply reports are the server's to choose, so every attribute passes the same shape table
as a span's (`cafe_otel._privacy.shapes`) before it is recorded: a value that does not fit, or that
holds a secret (one we were given, or what the secret patterns find), is left off the point
and counted in the account.

Where it records: given an `InProcessMetrics` (what `configure()` hands it), into our own
streams, aggregated where they are recorded (`cafe_otel._metrics.aggregation`: three SDK histogram
records a model call would cost more than its span); given any MeterProvider or Meter,
through that meter's instruments. Both give the same points (a test holds them equal). The
attributes of a call are shaped once per distinct set, not once per record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from opentelemetry import metrics
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from cafe.privacy import Scrubber
from cafe.trace import ConsentDecided, GenerationEnded, ShiftEnded, TicketFired, ToolEnded, TraceEvent
from cafe_otel import semconv as sc
from cafe_otel._export.account import TelemetryAccount
from cafe_otel._metrics.aggregation import AttributeKey, CallPoints, HistogramStream, InProcessMetrics
from cafe_otel._privacy.processor import SpanSanitiser
from cafe_otel._spans import mapping
from cafe_otel._spans.scope import our_version

TOKEN_USAGE_BUCKETS: tuple[float, ...] = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)
DURATION_BUCKETS: tuple[float, ...] = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)
_MEMO_SIZE = 1024  # distinct attribute sets remembered with their shaped form


def meter_of(source: metrics.MeterProvider | metrics.Meter) -> metrics.Meter:
    """Our instrumentation scope on a meter provider, with the pinned schema URL."""
    if isinstance(source, metrics.Meter):
        return source
    return source.get_meter(sc.INSTRUMENTATION_NAME, our_version(), schema_url=sc.SCHEMA_URL)


def our_scope() -> InstrumentationScope:
    return InstrumentationScope(sc.INSTRUMENTATION_NAME, our_version(), sc.SCHEMA_URL)


_CallKeys = tuple[AttributeKey, AttributeKey, AttributeKey, AttributeKey]


@dataclass(frozen=True, slots=True)
class ChatCall:
    """What the metrics of one model call need (`MetricsListener.record_call`)."""

    provider: str | None
    request_model: str | None
    response_model: str | None
    server_address: str | None
    server_port: int | None
    error_type: str | None
    duration_s: float
    input_tokens: int | None = None
    output_tokens: int | None = None
    time_to_first_chunk_s: float | None = None
    chunk_gaps_s: Sequence[float] = ()
    operation: str = sc.OP_CHAT
    service_tier: str | None = None
    """`openai.response.service_tier`: the tier the answer says served it."""
    system_fingerprint: str | None = None
    """`openai.response.system_fingerprint`."""


class _Histogram(Protocol):
    def record(self, value: float, key: AttributeKey) -> None: ...


class _Counter(Protocol):
    def add(self, amount: int, key: AttributeKey = ()) -> None: ...


class _OnMeter:
    """An API instrument behind the streams' interface: the key becomes the attributes."""

    def __init__(self, instrument: Any) -> None:
        self._instrument = instrument

    def record(self, value: float, key: AttributeKey) -> None:
        self._instrument.record(value, dict(key))

    def add(self, amount: int, key: AttributeKey = ()) -> None:
        self._instrument.add(amount, dict(key))


_INSTRUMENTS: dict[str, tuple[str, str, tuple[float, ...] | None]] = {
    # name: (unit, description, histogram boundaries or None for a counter)
    sc.METRIC_GEN_AI_CLIENT_TOKEN_USAGE: ("{token}", "Number of input and output tokens used.", TOKEN_USAGE_BUCKETS),
    sc.METRIC_GEN_AI_CLIENT_OPERATION_DURATION: ("s", "GenAI operation duration.", DURATION_BUCKETS),
    # docs/gen-ai/gen-ai-metrics.md lines 291 and 392: the duration's boundaries.
    sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK: (
        "s", "Time to receive the first chunk of a streamed response.", DURATION_BUCKETS),
    sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_PER_OUTPUT_CHUNK: (
        "s", "Time per output chunk after the first, of a streamed response.", DURATION_BUCKETS),
    sc.CAFE_SHIFTS: ("{shift}", "Shifts, by stop reason.", None),
    sc.CAFE_TOOL_EXECUTIONS: ("{execution}", "Tool executions, by tool and status.", None),
    sc.CAFE_TICKETS_FIRED: ("{ticket}", "Tickets sent to the kitchen.", None),
    sc.CAFE_CONSENT_DECISIONS: ("{decision}", "Consent-gate rounds, by outcome.", None),
    sc.CAFE_REPAIRS_USED: ("{repair}", "Invalid tool calls re-asked (repair budget spent).", None),
}


def _instrument(source: metrics.Meter | InProcessMetrics, name: str) -> Any:
    unit, description, boundaries = _INSTRUMENTS[name]
    if isinstance(source, InProcessMetrics):
        if boundaries is None:
            return source.counter(name, unit=unit, description=description)
        return source.histogram(name, unit=unit, description=description, boundaries=boundaries)
    if boundaries is None:
        return _OnMeter(source.create_counter(name, unit=unit, description=description))
    return _OnMeter(source.create_histogram(name, unit=unit, description=description,
                                            explicit_bucket_boundaries_advisory=boundaries))


class MetricsListener:
    def __init__(self, source: metrics.MeterProvider | metrics.Meter | InProcessMetrics, *,
                 account: TelemetryAccount | None = None, secrets: Iterable[str] = (),
                 secret_patterns: Scrubber | None = None) -> None:
        """`account` counts the attribute values left off for not fitting their shape;
        `secrets` (a live client's `secrets()`) never appear on a metric, nor does a value the
        secret patterns find (`secret_patterns`' own, cafe's by default)."""
        target = source if isinstance(source, InProcessMetrics) else meter_of(source)
        self._tokens: _Histogram = _instrument(target, sc.METRIC_GEN_AI_CLIENT_TOKEN_USAGE)
        self._duration: _Histogram = _instrument(target, sc.METRIC_GEN_AI_CLIENT_OPERATION_DURATION)
        self._first_chunk: _Histogram = _instrument(target, sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK)
        self._per_chunk: _Histogram = _instrument(target, sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_PER_OUTPUT_CHUNK)
        self._shifts: _Counter = _instrument(target, sc.CAFE_SHIFTS)
        self._tools: _Counter = _instrument(target, sc.CAFE_TOOL_EXECUTIONS)
        self._tickets: _Counter = _instrument(target, sc.CAFE_TICKETS_FIRED)
        self._consent: _Counter = _instrument(target, sc.CAFE_CONSENT_DECISIONS)
        self._repairs: _Counter = _instrument(target, sc.CAFE_REPAIRS_USED)
        # The span sanitiser's attribute check, on the metric keys: the same shapes. What it
        # leaves off is counted here, once an event (it would count each memo miss only).
        self._account = account
        self._guard = SpanSanitiser(sc.METRIC_ATTRIBUTES, secrets=secrets, secret_patterns=secret_patterns)
        # raw key -> (shaped key, keys withheld from it): an event's attributes repeat.
        self._shaped_keys: dict[AttributeKey, tuple[AttributeKey, tuple[str, ...]]] = {}
        # (provider, request model, response model, address, port, error type) ->
        # ((the shaped keys of input tokens, output tokens, duration and chunk timings), keys withheld)
        self._call_keys: dict[tuple[Any, ...], tuple[_CallKeys, tuple[str, ...]]] = {}
        # On our own streams, the same -> a model call's three points recorded in one call.
        self._in_process = isinstance(self._tokens, HistogramStream) and isinstance(self._duration, HistogramStream)
        self._call_points: dict[tuple[Any, ...], tuple[CallPoints, tuple[str, ...]]] = {}
        # No per-span state: one listener serves every tracer of a handle (shifts at once).
        self._handlers: dict[type, Callable[[Any], None]] = {
            GenerationEnded: self._generation_ended,
            ToolEnded: self._tool_ended, ShiftEnded: self._shift_ended,
            TicketFired: self._ticket_fired, ConsentDecided: self._consent_decided,
        }

    def add_secrets(self, secrets: Iterable[str]) -> None:
        self._guard.add_secrets(secrets)
        self._shaped_keys = {}  # what fit before may hold one of them
        self._call_keys = {}
        self._call_points = {}

    def _shape(self, raw: AttributeKey) -> tuple[AttributeKey, tuple[str, ...]]:
        found = self._shaped_keys.get(raw)
        if found is None:
            kept = self._guard.attributes(dict(raw))
            if kept is None:
                found = (raw, ())
            else:
                found = (tuple(kept.items()), tuple(key for key, _ in raw if key not in kept))
            if len(self._shaped_keys) >= _MEMO_SIZE:
                self._shaped_keys = {}
                self._call_keys = {}
                self._call_points = {}
            self._shaped_keys[raw] = found
        return found

    def _count(self, withheld: tuple[str, ...]) -> None:
        if withheld and self._account is not None:
            for key in withheld:
                self._account.add_withheld(key)

    def _shaped(self, raw: AttributeKey) -> AttributeKey:
        shaped, withheld = self._shape(raw)
        self._count(withheld)
        return shaped

    def on_event(self, event: TraceEvent) -> None:
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event)

    def _keys_of_call(self, call: tuple[Any, ...]) -> tuple[_CallKeys, tuple[str, ...]]:
        provider, request_model, response_model, address, port, error_type, *rest = call
        # A café generation's key ends at the error type; a call heard on the wire adds the
        # operation and the answer's service tier and fingerprint.
        operation, tier, fingerprint = (*rest, None, None, None)[:3]
        operation = operation or sc.OP_CHAT
        attributes: list[tuple[str, Any]] = [(sc.GEN_AI_OPERATION_NAME, operation),
                                             (sc.GEN_AI_PROVIDER_NAME, provider or mapping.UNKNOWN_PROVIDER)]
        if request_model:
            attributes.append((sc.GEN_AI_REQUEST_MODEL, request_model))
        if response_model:
            attributes.append((sc.GEN_AI_RESPONSE_MODEL, response_model))
        server = mapping.server_attributes(address, port)
        if sc.SERVER_ADDRESS in server:  # the port only with its address
            attributes.extend(server.items())
        chunks = tuple(attributes)
        # openai.md: the token usage and the duration carry the answer's tier and fingerprint.
        if tier is not None:
            attributes.append((sc.OPENAI_RESPONSE_SERVICE_TIER, tier))
        if fingerprint is not None:
            attributes.append((sc.OPENAI_RESPONSE_SYSTEM_FINGERPRINT, fingerprint))
        base = tuple(attributes)
        duration = (*base, (sc.ERROR_TYPE, error_type)) if error_type is not None else base
        shaped = [self._shape((*base, (sc.GEN_AI_TOKEN_TYPE, sc.TOKEN_TYPE_INPUT))),
                  self._shape((*base, (sc.GEN_AI_TOKEN_TYPE, sc.TOKEN_TYPE_OUTPUT))),
                  self._shape(duration), self._shape(chunks)]
        withheld = tuple(dict.fromkeys(key for _, left_off in shaped for key in left_off))
        return (shaped[0][0], shaped[1][0], shaped[2][0], shaped[3][0]), withheld

    def record_call(self, call: ChatCall) -> None:
        """The GenAI client metrics of one model call seen on the wire (any agent's): the
        same instruments, attributes and shapes as a café generation's, and, for a streamed
        call, the time to its first chunk and the time between each later chunk."""
        key = (call.provider, call.request_model, call.response_model, call.server_address, call.server_port,
               call.error_type, call.operation, call.service_tier, call.system_fingerprint)
        found = self._call_keys.get(key)
        if found is None:
            found = self._call_keys[key] = self._keys_of_call(key)
        keys, withheld = found
        self._count(withheld)
        if call.input_tokens is not None:
            self._tokens.record(call.input_tokens, keys[0])
        if call.output_tokens is not None:
            self._tokens.record(call.output_tokens, keys[1])
        self._duration.record(max(call.duration_s, 0.0), keys[2])
        if call.time_to_first_chunk_s is not None:
            self._first_chunk.record(max(call.time_to_first_chunk_s, 0.0), keys[3])
        for gap in call.chunk_gaps_s:
            self._per_chunk.record(max(gap, 0.0), keys[3])

    def _generation_ended(self, event: GenerationEnded) -> None:
        started = event.started_at
        request, result = event.request, event.result
        call = (request.provider, request.model, result.model if result is not None else None,
                request.server_address, request.server_port, None if event.error is None else event.error_type)
        if self._in_process:
            points = self._call_points.get(call)
            if points is None:
                keys, withheld = self._keys_of_call(call)
                points = self._call_points[call] = (CallPoints(self._tokens, self._duration,  # type: ignore[arg-type]
                                                               keys[:3]), withheld)
            if points[1]:
                self._count(points[1])
            points[0].record(result.input_tokens if result is not None else None,
                             result.output_tokens if result is not None else None,
                             max(event.at - started, 0.0) if started is not None else None)
            return
        found = self._call_keys.get(call)
        if found is None:
            found = self._call_keys[call] = self._keys_of_call(call)
        keys, withheld = found
        self._count(withheld)
        if result is not None:
            if result.input_tokens is not None:
                self._tokens.record(result.input_tokens, keys[0])
            if result.output_tokens is not None:
                self._tokens.record(result.output_tokens, keys[1])
        if started is not None:
            self._duration.record(max(event.at - started, 0.0), keys[2])

    def _tool_ended(self, event: ToolEnded) -> None:
        attributes: list[tuple[str, Any]] = [(sc.GEN_AI_TOOL_NAME, mapping.tool_label(event.name, event.defined))]
        if event.status is not None:
            attributes.append((sc.CAFE_TOOL_STATUS, event.status.value))
        if event.error is not None:
            attributes.append((sc.ERROR_TYPE, event.error_type))
        self._tools.add(1, self._shaped(tuple(attributes)))

    def _shift_ended(self, event: ShiftEnded) -> None:
        if event.stop_reason is not None:
            self._shifts.add(1, self._shaped(((sc.CAFE_STOP_REASON, event.stop_reason.value),)))
        else:
            self._shifts.add(1, self._shaped(((sc.ERROR_TYPE, event.error_type or "unknown"),)))
        if event.repairs:
            self._repairs.add(event.repairs)

    def _ticket_fired(self, event: TicketFired) -> None:
        self._tickets.add(1)

    def _consent_decided(self, event: ConsentDecided) -> None:
        self._consent.add(1, self._shaped(((sc.CAFE_CONSENT_OUTCOME, event.outcome.value),)))
