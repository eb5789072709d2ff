"""A recording into OpenTelemetry spans through the same `SpanListener` as a live shift.

A recording a replayer claims (`cafe.recording.replayers`: the café example's shifts) is first
replayed (zero model calls) into a buffer of cafe trace events, so the export has the live
shift's whole tree (shift, phases, `chat` and tool spans) with the
same names, kinds, parents and attributes. Only then are the events handed to the span
listener, each on the recording's timeline: a `chat` span at its call's recorded
`timing.start_unix_nano`/`duration_ns` (or a synthetic, deterministic timeline anchored at
the header's clock origin, or 0), the events between two calls spread evenly between them.

A recording that does not replay (a plain `{request, response}` file from another harness,
a truncated one) is exported from its calls alone: an `invoke_agent` span with one `chat`
span per call, built from the same events and mapped by the same listener.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

from opentelemetry import trace

from cafe.apis import ModelCall, openai_chat, text_of
from cafe.privacy import Scrubber, scrubbed
from cafe.recording import Recording, call_windows, load_recording, replay_into
from cafe.trace import (
    ENDED,
    STARTED,
    EventLog,
    GenerationEnded,
    GenerationRequest,
    GenerationResult,
    GenerationStarted,
    ShiftEnded,
    ShiftStarted,
    StopReason,
    TickClock,
    TraceEvent,
    Tracer,
)
from cafe_otel._spans.content import CaptureMode, capture_mode
from cafe_otel._spans.listener import SpanListener

UNKNOWN_PROVIDER = "unknown"
# The agent of a recording whose lines are the café example's calls (the format's version 0-1
# lines, and a live shift's), when no replayer draws its whole tree; any other agent's is unnamed.
SHIFT_AGENT_NAME = "cafe-counter"
AGENT_NAME = "agent"


def _stop_reason(recording: Recording) -> StopReason | None:
    try:
        return StopReason(recording.ending.stop_reason) if recording.ending is not None else None
    except ValueError:  # another harness's reason: not one of ours, so not claimed as one
        return None


def calls_only_events(recording: Recording, *, keep_inputs: bool = False) -> list[TraceEvent]:
    """The events of a recording that does not replay: the shift and one generation a call.
    A call of an API other than chat completions is read by its API's reading (`cafe.apis`):
    its operation, model, usage, finish reasons and (with `keep_inputs`) content are its own."""
    from cafe.view import read_call  # the pages' reading of a recorded call: loaded when exporting one

    provider = recording.header.provider or UNKNOWN_PROVIDER
    agent = SHIFT_AGENT_NAME if recording.holds_shift_calls else AGENT_NAME
    events: list[TraceEvent] = [ShiftStarted(1, None, 0.0, agent, recording.header.conversation_id,
                                             recording.model or "unknown", provider)]
    for number, call in enumerate(recording.calls, start=2):
        temperature = call.request.get("temperature")
        reading: ModelCall | None = read_call(call, content=keep_inputs)
        asked = reading.request if reading is not None and reading.api is not openai_chat.API else None
        if asked is None:  # a chat call, or one no reading knows: read as a chat call
            reading = None
        request = GenerationRequest(
            model=(asked.model if asked is not None else None) or call.model or "unknown",
            provider=asked.provider if asked is not None and provider == UNKNOWN_PROVIDER else provider,
            messages=(call.request.get("messages") or []) if keep_inputs and reading is None else (),
            temperature=(float(temperature) if isinstance(temperature, int | float)
                         and not isinstance(temperature, bool) else None),
            tools=call.request.get("tools"),  # which names are the agent's own, not exported
            reading=reading,
        )
        result = GenerationResult.of(call.response) if reading is None else _result_of(reading, call.response)
        events.append(GenerationStarted(number, 1, 0.0, f"chat {request.model}", request))
        events.append(GenerationEnded(number, 1, 0.0, request, result))
    events.append(ShiftEnded(1, None, 0.0, stop_reason=_stop_reason(recording)))
    return events


def _result_of(reading: ModelCall, response: Mapping[str, Any]) -> GenerationResult:
    """What the answer says, as its API's reading gives it."""
    answer = reading.response
    usage = answer.usage
    total = (usage.input_tokens + usage.output_tokens
             if usage.input_tokens is not None and usage.output_tokens is not None else None)
    return GenerationResult(response=response, model=answer.model, response_id=answer.id,
                            finish_reasons=answer.finish_reasons, input_tokens=usage.input_tokens,
                            output_tokens=usage.output_tokens, total_tokens=total,
                            tool_calls=tuple(call.name for call in answer.tool_calls if call.name is not None),
                            output=text_of(answer.output_messages))


def shift_events(recording: Recording, *, keep_inputs: bool = False) -> list[TraceEvent]:
    """The recording's run as cafe trace events: replayed by the replayer that claims it (the
    café example's, for a shift), else its calls."""
    log = EventLog()
    tracer = Tracer(clock=TickClock(), keep_inputs=keep_inputs, tree=False, listeners=[log])
    try:
        replayed = replay_into(recording, tracer)
    except Exception:  # any replay failure means: export what was recorded, the calls
        replayed = False
    return log.events if replayed else calls_only_events(recording, keep_inputs=keep_inputs)


def on_timeline(events: Sequence[TraceEvent], recording: Recording) -> dict[int, int]:
    """Each event's time (keyed by `id(event)`) on the recording's timeline: the shift's
    window at its ends, each generation at its call's window, and the events between two
    of those spread evenly between them."""
    recorded = call_windows(recording)
    window, windows = recorded.shift, recorded.calls
    anchors: dict[int, int] = {0: window.start, len(events) - 1: window.end}
    starts = ends = 0
    for index, event in enumerate(events):
        if isinstance(event, GenerationStarted) and starts < len(windows):
            anchors[index] = windows[starts].start
            starts += 1
        elif isinstance(event, GenerationEnded) and ends < len(windows):
            anchors[index] = windows[ends].end
            ends += 1
    fixed = sorted(anchors)
    times: dict[int, int] = {}
    for left, right in pairwise(fixed):
        a, b = anchors[left], anchors[right]
        for index in range(left, right + 1):
            times[id(events[index])] = a + (b - a) * (index - left) // (right - left)
    if len(fixed) == 1:
        times[id(events[0])] = anchors[0]
    _contain(events, times)
    return times


def _contain(events: Sequence[TraceEvent], times: dict[int, int]) -> None:
    """Widen each span to cover its children. Recorded calls can overlap or run out of
    order (a stalled wall clock), and a turn must still hold its `chat` span."""
    open_starts: list[TraceEvent] = []
    latest: dict[int, int] = {}  # span id -> the latest end among its children
    for event in events:
        if isinstance(event, STARTED):
            at = times[id(event)]
            for ancestor in open_starts:
                times[id(ancestor)] = min(times[id(ancestor)], at)
            open_starts.append(event)
        elif isinstance(event, ENDED) and open_starts:
            started = open_starts.pop()
            end = max(times[id(event)], times[id(started)], latest.pop(event.span_id, times[id(started)]))
            times[id(event)] = end
            if event.parent_id is not None:
                latest[event.parent_id] = max(latest.get(event.parent_id, end), end)


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
    # Scrubbed as pages show it: a file another harness wrote may hold a key in a value a span
    # carries as metadata (a model, a response or tool call id), which fits its shape. cafe's
    # own recordings were scrubbed when written, and export as they did.
    recording = scrubbed(recording, Scrubber.from_environment(environ))
    capture = capture_mode(capture_content, environ)
    events = shift_events(recording, keep_inputs=capture.enabled)
    times = on_timeline(events, recording)
    # Not attached as the current context: nothing else runs inside these spans.
    listener = SpanListener(provider, capture=capture, timestamps=lambda event: times[id(event)],
                            attach_context=False)
    for event in events:
        listener.on_event(event)
    return listener.spans_started


