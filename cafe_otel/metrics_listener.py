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
as a span's (`cafe_otel.shapes`) before it is recorded: a value that does not fit, or that
holds one of the secrets we were given, is left off the point and counted in the account.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry import metrics

from cafe.trace.events import (
    ConsentDecided,
    GenerationEnded,
    GenerationStarted,
    ShiftEnded,
    TicketFired,
    ToolEnded,
    TraceEvent,
)
from cafe_otel import mapping
from cafe_otel import semconv as sc
from cafe_otel.account import TelemetryAccount
from cafe_otel.metadata_processor import SpanSanitiser
from cafe_otel.scope import our_version

TOKEN_USAGE_BUCKETS: tuple[float, ...] = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)
DURATION_BUCKETS: tuple[float, ...] = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)


def meter_of(source: metrics.MeterProvider | metrics.Meter) -> metrics.Meter:
    """Our instrumentation scope on a meter provider, with the pinned schema URL."""
    if isinstance(source, metrics.Meter):
        return source
    return source.get_meter(sc.INSTRUMENTATION_NAME, our_version(), schema_url=sc.SCHEMA_URL)


class MetricsListener:
    def __init__(self, source: metrics.MeterProvider | metrics.Meter, *, account: TelemetryAccount | None = None,
                 secrets: Iterable[str] = ()) -> None:
        """`account` counts the attribute values left off for not fitting their shape;
        `secrets` (a live client's `secrets()`) never appear on a metric."""
        meter = meter_of(source)
        # The span sanitiser's attribute check, on the metric keys: the same shapes, the
        # same memo of values already found to fit, the same count of what was withheld.
        self._guard = SpanSanitiser(sc.METRIC_ATTRIBUTES, account=account, secrets=secrets)
        self._tokens = meter.create_histogram(
            sc.METRIC_GEN_AI_CLIENT_TOKEN_USAGE, unit="{token}", description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=TOKEN_USAGE_BUCKETS)
        self._duration = meter.create_histogram(
            sc.METRIC_GEN_AI_CLIENT_OPERATION_DURATION, unit="s", description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
        self._shifts = meter.create_counter(sc.CAFE_SHIFTS, unit="{shift}", description="Shifts, by stop reason.")
        self._tools = meter.create_counter(
            sc.CAFE_TOOL_EXECUTIONS, unit="{execution}", description="Tool executions, by tool and status.")
        self._tickets = meter.create_counter(
            sc.CAFE_TICKETS_FIRED, unit="{ticket}", description="Tickets sent to the kitchen.")
        self._consent = meter.create_counter(
            sc.CAFE_CONSENT_DECISIONS, unit="{decision}", description="Consent-gate rounds, by outcome.")
        self._repairs = meter.create_counter(
            sc.CAFE_REPAIRS_USED, unit="{repair}", description="Invalid tool calls re-asked (repair budget spent).")
        self._started: dict[int, float] = {}
        self._handlers: dict[type, Callable[[Any], None]] = {
            GenerationStarted: self._generation_started, GenerationEnded: self._generation_ended,
            ToolEnded: self._tool_ended, ShiftEnded: self._shift_ended,
            TicketFired: self._ticket_fired, ConsentDecided: self._consent_decided,
        }

    def add_secrets(self, secrets: Iterable[str]) -> None:
        self._guard.add_secrets(secrets)

    def _shaped(self, attributes: Mapping[str, Any]) -> Mapping[str, Any]:
        kept = self._guard.attributes(attributes)
        return attributes if kept is None else kept

    def on_event(self, event: TraceEvent) -> None:
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event)

    def _generation_started(self, event: GenerationStarted) -> None:
        self._started[event.span_id] = event.at

    def _generation_ended(self, event: GenerationEnded) -> None:
        started = self._started.pop(event.span_id, None)
        request, result = event.request, event.result
        attributes: dict[str, Any] = {
            sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
            sc.GEN_AI_PROVIDER_NAME: request.provider or mapping.UNKNOWN_PROVIDER,
        }
        if request.model:
            attributes[sc.GEN_AI_REQUEST_MODEL] = request.model
        if result is not None and result.model:
            attributes[sc.GEN_AI_RESPONSE_MODEL] = result.model
        server = mapping.server_attributes(request.server_address, request.server_port)
        if sc.SERVER_ADDRESS in server:  # the port only with its address
            attributes.update(server)
        if result is not None:
            for token_type, count in ((sc.TOKEN_TYPE_INPUT, result.input_tokens),
                                      (sc.TOKEN_TYPE_OUTPUT, result.output_tokens)):
                if count is not None:
                    self._tokens.record(count, self._shaped({**attributes, sc.GEN_AI_TOKEN_TYPE: token_type}))
        if event.error is not None:
            attributes[sc.ERROR_TYPE] = event.error_type
        if started is not None:
            self._duration.record(max(event.at - started, 0.0), self._shaped(attributes))

    def _tool_ended(self, event: ToolEnded) -> None:
        attributes: dict[str, Any] = {sc.GEN_AI_TOOL_NAME: mapping.tool_label(event.name)}
        if event.status is not None:
            attributes[sc.CAFE_TOOL_STATUS] = event.status.value
        if event.error is not None:
            attributes[sc.ERROR_TYPE] = event.error_type
        self._tools.add(1, self._shaped(attributes))

    def _shift_ended(self, event: ShiftEnded) -> None:
        if event.stop_reason is not None:
            self._shifts.add(1, self._shaped({sc.CAFE_STOP_REASON: event.stop_reason.value}))
        else:
            self._shifts.add(1, self._shaped({sc.ERROR_TYPE: event.error_type or "unknown"}))
        if event.repairs:
            self._repairs.add(event.repairs)

    def _ticket_fired(self, event: TicketFired) -> None:
        self._tickets.add(1)

    def _consent_decided(self, event: ConsentDecided) -> None:
        self._consent.add(1, self._shaped({sc.CAFE_CONSENT_OUTCOME: event.outcome.value}))
