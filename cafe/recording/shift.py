"""Recording a whole shift, and replaying one with zero model calls."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cafe.clients.base import ChatClient
from cafe.consent import Decision, Responder, make_responder
from cafe.errors import ScriptError
from cafe.loop import DEFAULT_CONVERSATION_ID, ShiftRun, run_shift
from cafe.recording.format import Ending, Recording
from cafe.recording.modes import RecordMode
from cafe.recording.reader import load_recording
from cafe.recording.replay import ReplayClient
from cafe.recording.scrub import Scrubber
from cafe.recording.writer import NanoClock, RecordingClient
from cafe.trace.tracer import Tracer
from cafe.transcript import transcript_digest


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
    **shift_options: Any,
) -> tuple[ShiftRun, Tracer]:
    """Run a shift through a `RecordingClient` on `path`. `decisions`, when given, are kept
    in the header so that `cafe replay` can rebuild the same synthetic customer."""
    tracer = tracer if tracer is not None else Tracer()
    shift_options.setdefault("conversation_id", DEFAULT_CONVERSATION_ID)
    clock_options = {"wall_clock_ns": wall_clock_ns} if wall_clock_ns else {}
    recorder = RecordingClient(
        client, path, mode=mode, scrubber=scrubber, seed=seed, script=script,
        decisions=decisions, conversation_id=shift_options["conversation_id"], **clock_options,
    )
    try:
        run = run_shift(recorder, script, responder, tracer=tracer, **shift_options)
        # The digest is of the conversation as the recording holds it (scrubbed), which is
        # what a replay of it can reproduce.
        digest = transcript_digest(recorder.writer.scrubbed(run.messages))
        recorder.finish(Ending(run.stop_reason, run.model_calls, digest))
    finally:
        recorder.close()
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
    """A fresh synthetic customer with the recorded decisions (rejects once they run out)."""
    decisions = recording.header.decisions or []
    return make_responder([(d[0], d[1] if len(d) > 1 else None) for d in decisions])


def replay_shift(
    path: Path | str | Recording,
    script: Sequence[str] | None = None,
    *,
    responder: Responder | None = None,
    tracer: Tracer | None = None,
    ignore: Sequence[str] = (),
    scrubber: Scrubber | None = None,
    allow_truncated: bool = False,
    **shift_options: Any,
) -> tuple[ShiftRun, Tracer]:
    """Replay with zero model calls; raises `ReplayMismatch` on the first differing request
    and `UnusedCalls` when the shift ended with recorded calls left over."""
    tracer = tracer if tracer is not None else Tracer()
    recording = (
        path if isinstance(path, Recording)
        else load_recording(path, allow_truncated=allow_truncated)
    )
    client = ReplayClient(recording, ignore=ignore, scrubber=scrubber)
    if recording.header.conversation_id is not None:
        shift_options.setdefault("conversation_id", recording.header.conversation_id)
    run = run_shift(
        client,
        script_of(recording) if script is None else script,
        responder if responder is not None else responder_of(recording),
        tracer=tracer,
        **shift_options,
    )
    client.assert_exhausted()
    return run, tracer
