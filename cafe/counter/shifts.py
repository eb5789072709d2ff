"""Recording a whole shift, and replaying one with zero model calls."""

from __future__ import annotations

import hashlib
import inspect
import json
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cafe.counter.clients.base import ChatClient, Message, Response
from cafe.counter.clients.tracing import TracingClient
from cafe.counter.consent import APPROVE, EDIT, REJECT, Decision, Responder, SyntheticCustomer, make_responder
from cafe.counter.loop import ShiftRun, new_conversation_id, run_shift
from cafe.counter.recording_client import RecordingClient
from cafe.counter.replay_client import ReplayClient
from cafe.counter.tools import PROPOSE_ORDER
from cafe.counter.transcript import transcript_digest
from cafe.errors import ScriptError
from cafe.privacy import Scrubber
from cafe.recording.format import Ending, Recording, is_wire
from cafe.recording.modes import RecordMode
from cafe.recording.reader import load_recording
from cafe.recording.windows import RecordedClock
from cafe.trace.clock import NanoClock, Timeline
from cafe.trace.outcomes import ToolStatus
from cafe.trace.tracer import Tracer

if TYPE_CHECKING:
    from cafe.counter.clients.wire import WireReplayClient

_RUN_DEFAULTS = {
    name: parameter.default for name, parameter in inspect.signature(run_shift).parameters.items()
    if name in ("max_turns", "max_repairs", "temperature")
}


def record_shift(
    client: ChatClient,
    script: Sequence[str],
    path: Path | str,
    *,
    responder: Responder,
    tracer: Tracer | None = None,
    mode: RecordMode | str = RecordMode.ONCE,
    decisions: Sequence[Decision] | None = None,
    seed: int | None = None,
    scrubber: Scrubber | None = None,
    wall_clock_ns: NanoClock | None = None,
    timeline: Timeline | None = None,
    **shift_options: Any,
) -> tuple[ShiftRun, Tracer]:
    """Run a shift through a `RecordingClient` on `path`. The header keeps what a replay
    needs to run it again: `decisions` (to rebuild the same synthetic customer; by default
    those of a responder made by `make_responder`), the seed,
    the script and the shift's settings (`max_turns`, `max_repairs`, `temperature`, the
    conversation id).

    Call starts come from `timeline`, which must then be `tracer`'s clock, or, when no
    tracer is given, from the timeline of the tracer made here. If the shift fails, `path`
    is left as it was and the calls recorded so far stay in `PATH.partial` (named in a
    note on the error)."""
    if decisions is None and isinstance(responder, SyntheticCustomer):
        decisions = responder.decisions  # what `make_responder` was given: replays play it again
    follows_tracer = tracer is None or timeline is not None
    if timeline is None:
        timeline = Timeline(wall_clock_ns() if wall_clock_ns else None)
    tracer = tracer if tracer is not None else Tracer(clock=timeline)
    if shift_options.get("conversation_id") is None:
        shift_options["conversation_id"] = new_conversation_id()
    settings = {**_RUN_DEFAULTS, **{k: v for k, v in shift_options.items() if k in _RUN_DEFAULTS}}
    recorder = RecordingClient(
        client, path, mode=mode, scrubber=scrubber, seed=seed, script=script,
        decisions=decisions, conversation_id=shift_options["conversation_id"],
        shift_settings=settings, timeline=timeline, follows_tracer=follows_tracer,
    )
    try:
        run = run_shift(recorder, script, responder, tracer=tracer, **shift_options)
        # The digest is of the conversation as the recording holds it (scrubbed), which is
        # what a replay of it can reproduce.
        digest = transcript_digest(recorder.writer.scrubbed(run.messages))
        recorder.finish(Ending(run.stop_reason, run.model_calls, digest))
    except BaseException as error:
        kept = recorder.abort()
        if kept is not None:
            error.add_note(f"the {recorder.writer.calls} call(s) recorded before it are kept in {kept}")
        raise
    return run, tracer


def script_of(recording: Recording) -> list[str]:
    """The customer lines a recording was made with: from its header, or, for a plain
    `{request, response}` file, the user messages of its last request."""
    if recording.header.script is not None:
        return list(recording.header.script)
    if not recording.calls:
        raise ScriptError(f"{recording.path}: no script in the header and no calls to read one from")
    messages = recording.calls[-1].request.get("messages") or []
    return [str(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user"]


def responder_of(recording: Recording) -> Responder:
    """A fresh synthetic customer with the recorded decisions (rejects once they run out).
    A recording whose header holds none (a plain `{request, response}` file, or one made
    with a responder of its own) gets the decisions its conversation shows."""
    if recording.header.decisions is None:
        return make_responder(decisions_shown(recording))
    return make_responder([(d[0], d[1] if len(d) > 1 else None) for d in recording.header.decisions])


def decisions_shown(recording: Recording) -> list[Decision]:
    """The customer's answers to each `propose_order` of the recorded conversation, read from
    the last request's messages: an approval, a rejection, or, where another order than the
    one proposed was approved, an edit to it followed by the approval. Reading stops at an
    outcome that does not say what the customer answered (the rounds ran out)."""
    messages = recording.calls[-1].request.get("messages") if recording.calls else None
    proposed: dict[str, Any] = {}
    decisions: list[Decision] = []
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, dict):
            continue
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and function.get("name") == PROPOSE_ORDER:
                proposed[str(call.get("id"))] = _json_object(function.get("arguments"))
        if message.get("role") != "tool" or str(message.get("tool_call_id")) not in proposed:
            continue
        asked = proposed[str(message.get("tool_call_id"))]
        result = _json_object(message.get("content"))
        status = result.get("status")
        if status == ToolStatus.APPROVED:
            ticket = result.get("ticket")
            ticket = ticket if isinstance(ticket, dict) else {}
            approved = {"items": ticket.get("items"), "table": ticket.get("table")}
            if approved != {"items": asked.get("items"), "table": asked.get("table")}:
                decisions.append((EDIT, approved))
            decisions.append((APPROVE, None))
        elif status == ToolStatus.REJECTED:
            decisions.append((REJECT, None))
        else:
            break
    return decisions


def _json_object(text: Any) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _stand_in_id(recording: Recording) -> str:
    """The conversation id of a recording that holds none (a plain {request, response} file):
    a UUID5 of its requests, so that every replay of it shares one id (its OTLP bytes stay
    the same) and replays of two different recordings never share one. A digest, not text."""
    digest = hashlib.sha256()
    for call in recording.calls:
        digest.update(json.dumps(call.request, sort_keys=True, separators=(",", ":"), default=repr).encode())
        digest.update(b"\n")
    return f"shift-{uuid.UUID(bytes=digest.digest()[:16], version=5)}"


def replay_shift(
    path: Path | str | Recording,
    script: Sequence[str] | None = None,
    *,
    responder: Responder | None = None,
    tracer: Tracer | None = None,
    ignore: Sequence[str] = (),
    scrubber: Scrubber | None = None,
    allow_truncated: bool = False,
    recorded_clock: RecordedClock | None = None,
    environ: Mapping[str, str] | None = None,
    **shift_options: Any,
) -> tuple[ShiftRun, Tracer]:
    """Replay with zero model calls; raises `ReplayMismatch` on the first differing request
    and `UnusedCalls` when the shift ended with recorded calls left over.

    With `recorded_clock` (which must be `tracer`'s clock), each generation span sits where
    its recorded call did.

    A shift recorded live (format version 2) replays through the wire: the live client,
    with the settings `environ` gives (`CAFE_MODEL`, `CAFE_BASE_URL`; the recorded ones
    where it gives none, and with no `environ`), over the recorded HTTP exchanges, the
    whole JSON body compared (`cafe.wire`). Any other recording replays through
    `ReplayClient`, the four arguments of each call compared.

    The shift runs with the settings its header recorded (explicit `shift_options` win).
    A recording without an end line (a shift that did not finish) is replayed up to its
    last recorded call: the turns are capped at the number of calls it holds."""
    tracer = tracer if tracer is not None else Tracer()
    recording = (
        path if isinstance(path, Recording)
        else load_recording(path, allow_truncated=allow_truncated)
    )
    replay: ReplayClient | WireReplayClient
    if is_wire(recording.header.version) and recording.holds_shift_calls:
        from cafe.counter.clients.wire import WireReplayClient

        replay = WireReplayClient(recording, ignore=ignore, scrubber=scrubber, environ=environ)
    else:
        replay = ReplayClient(recording, ignore=ignore, scrubber=scrubber)
    client: ChatClient = replay
    if recorded_clock is not None and tracer.listening:
        client = RecordedTracingClient(replay, tracer, recorded_clock)
    for key, value in recording.header.shift_options().items():
        shift_options.setdefault(key, value)
    # The recorded conversation keeps its id; one that recorded none gets its recording's own.
    shift_options.setdefault("conversation_id", recording.header.conversation_id or _stand_in_id(recording))
    if recording.ending is None:
        recorded = len(recording.calls)
        shift_options["max_turns"] = min(shift_options.get("max_turns", recorded), recorded)
    run = run_shift(
        client,
        script_of(recording) if script is None else script,
        responder if responder is not None else responder_of(recording),
        tracer=tracer,
        **shift_options,
    )
    replay.assert_exhausted()
    return run, tracer


class RecordedTracingClient(TracingClient):
    """A `TracingClient` that moves a `RecordedClock` to each call before its span opens."""

    def __init__(self, client: ChatClient, tracer: Tracer, clock: RecordedClock) -> None:
        super().__init__(client, tracer)
        self._recorded_clock = clock

    def chat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        temperature: float = 0.0,
        tool_choice: Any = None,
    ) -> Response:
        self._recorded_clock.call_begins()
        try:
            return super().chat(messages, tools, temperature, tool_choice)
        finally:
            self._recorded_clock.call_ends()


def replay_into_tracer(recording: Recording, tracer: Tracer) -> bool:
    """The café's replayer (`cafe.recording.replayers`): a recording of a shift is replayed
    into `tracer` (what it raises, a stale recording, is raised); any other is not its own."""
    if not recording.holds_shift_calls:
        return False
    replay_shift(recording, tracer=tracer)
    return True
