"""A recording straight into OpenTelemetry spans, with explicit start and end times.

One `invoke_agent` span and, under it, one `chat` span per recorded call, carrying the
usage, model, finish reasons, response id and requested tool names its response holds.
Times come from the recording's timeline (`timing.start_unix_nano`/`duration_ns`) where
it has one; otherwise a synthetic, deterministic timeline anchored at the header's clock
origin (or 0). Nothing is re-run: a plain `{request, response}` file from another harness
converts the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from cafe.loop import AGENT_NAME
from cafe.recording.format import RecordedCall, Recording
from cafe.recording.reader import load_recording
from cafe_otel import mapping
from cafe_otel import semconv as sc
from cafe_otel.content import CaptureMode, capture_mode
from cafe_otel.tracer import otel_tracer_of

# The synthetic timeline: calls 1 ms long, 1 ms apart, after a 1 ms lead-in.
SYNTHETIC_STEP_NS = 1_000_000
UNKNOWN_PROVIDER = "unknown"


@dataclass(frozen=True)
class CallWindow:
    start: int
    end: int


def call_windows(recording: Recording) -> tuple[CallWindow, list[CallWindow]]:
    """The agent's window and each call's, in epoch ns."""
    origin = recording.header.clock_origin_unix_nano or 0
    calls: list[CallWindow] = []
    for position, call in enumerate(recording.calls):
        if call.timing is not None:
            start = call.timing.start_unix_nano
            calls.append(CallWindow(start, start + call.timing.duration_ns))
        else:
            start = origin + (2 * position + 1) * SYNTHETIC_STEP_NS
            calls.append(CallWindow(start, start + SYNTHETIC_STEP_NS))
    starts = [c.start for c in calls]
    timed = any(c.timing is not None for c in recording.calls)
    if recording.header.clock_origin_unix_nano is not None or not timed:
        agent_start = min([origin, *starts])
    else:
        agent_start = min(starts)
    agent_end = max([c.end for c in calls], default=agent_start)
    if not timed:
        agent_end += SYNTHETIC_STEP_NS  # close the synthetic shift a step after its last call
    return CallWindow(agent_start, agent_end), calls


def _chat_attributes(recording: Recording, call: RecordedCall, model: str, provider: str) -> dict:
    temperature = call.request.get("temperature")
    attributes = {
        sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
        sc.GEN_AI_PROVIDER_NAME: provider,
        sc.GEN_AI_REQUEST_MODEL: model,
        sc.CAFE_RECORDING_CALL: call.index,
    }
    if recording.header.conversation_id is not None:
        attributes[sc.GEN_AI_CONVERSATION_ID] = recording.header.conversation_id
    if isinstance(temperature, int | float) and not isinstance(temperature, bool):
        attributes[sc.GEN_AI_REQUEST_TEMPERATURE] = float(temperature)
    attributes.update(mapping.response_attributes(call.response))
    return attributes


def export_recording(
    recording: Recording | Path | str,
    provider: trace.TracerProvider | trace.Tracer,
    *,
    capture_content: CaptureMode | str | bool | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Emit the recording's spans on `provider`; returns how many spans were made."""
    if not isinstance(recording, Recording):
        recording = load_recording(recording)
    capture = capture_mode(capture_content, environ)
    tracer = otel_tracer_of(provider)
    model = recording.model or "unknown"
    provider_name = recording.header.provider or UNKNOWN_PROVIDER
    window, windows = call_windows(recording)

    agent_attributes = {
        sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
        sc.GEN_AI_PROVIDER_NAME: provider_name,
        sc.GEN_AI_AGENT_NAME: AGENT_NAME,
        sc.GEN_AI_REQUEST_MODEL: model,
        sc.CAFE_RECORDING_VERSION: recording.header.version,
    }
    if recording.ending is not None:
        agent_attributes[sc.CAFE_STOP_REASON] = recording.ending.stop_reason
    if recording.header.conversation_id is not None:
        agent_attributes[sc.GEN_AI_CONVERSATION_ID] = recording.header.conversation_id
    agent = tracer.start_span(
        sc.AGENT_SPAN_NAME.format(agent=AGENT_NAME), context=None, kind=SpanKind.INTERNAL,
        attributes=agent_attributes, start_time=window.start,
    )
    parent = trace.set_span_in_context(agent)
    for call, call_window in zip(recording.calls, windows, strict=True):
        request_model = model if recording.header.model else call.response.get("model") or model
        span = tracer.start_span(
            sc.CHAT_SPAN_NAME.format(model=request_model), context=parent, kind=SpanKind.CLIENT,
            attributes=_chat_attributes(recording, call, request_model, provider_name),
            start_time=call_window.start,
        )
        if capture.enabled:
            content = mapping.chat_content(call.request.get("messages") or [], call.response,
                                           call.request.get("tools"))
            if capture.on_span:
                span.set_attributes(content)
            if capture.on_event:
                span.add_event(sc.CONTENT_EVENT_NAME, content, timestamp=call_window.end)
        span.end(end_time=call_window.end)
    agent.end(end_time=window.end)
    return len(recording.calls) + 1
