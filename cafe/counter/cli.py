"""`cafe shift` and `cafe replay`: run a shift, or replay a recorded one with zero model calls (the
café example's commands, added to `cafe` as the `counter` plugin)."""

from __future__ import annotations

import argparse
import functools
import random
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO, TypeAlias

from cafe import view
from cafe.cli.arguments import file_to_read, page_to_write, positive, recording_to_write
from cafe.cli.plugins import CliPlugin, CommandContext, TelemetrySession
from cafe.cli.terminal import DEBUG_VARIABLE, one_line
from cafe.counter.arguments import parse_decision, read_script, script_to_read
from cafe.counter.clients.base import ChatClient, secrets_of
from cafe.counter.clients.choose import get_client
from cafe.counter.consent import make_responder
from cafe.counter.demo import DEFAULT_DECISIONS, DEFAULT_SCRIPT
from cafe.counter.handover import handover_note
from cafe.counter.loop import ShiftRun, run_shift
from cafe.counter.shifts import record_shift, replay_shift
from cafe.counter.transcript import transcript, transcript_digest
from cafe.errors import CafeError
from cafe.privacy import Scrubber
from cafe.recording.errors import ReplayError, TranscriptMismatch
from cafe.recording.format import Recording
from cafe.recording.reader import load_recording
from cafe.recording.windows import RecordedClock, call_windows
from cafe.trace.clock import Clock, Timeline
from cafe.trace.tracer import Tracer
from cafe.trace.usage import usage_of


def _seeded(seed: int | None) -> tuple[int, random.Random]:
    seed = secrets.randbits(32) if seed is None else seed
    return seed, random.Random(seed)


def _print_shift(out: TextIO, run: ShiftRun, tracer: Tracer, note: str) -> None:
    usage = usage_of(tracer)
    out.write(
        "== transcript ==\n" + transcript(run) + "\n\n"
        "== spans ==\n" + tracer.render() + "\n\n"
        f"== usage ==\n{usage.calls} model call(s), {usage.input_tokens} input + "
        f"{usage.output_tokens} output = {usage.total_tokens} tokens, {usage.seconds:.3f}s in calls\n\n"
        "== handover ==\n" + note + "\n\n"
        f"stop reason: {run.stop_reason}\n"
    )


def _open_telemetry(
    plugins: Sequence[CliPlugin], args: argparse.Namespace, environ: Mapping[str, str], *,
    clock: Clock, origin_unix_nano: int, client: ChatClient | None = None,
) -> TelemetrySession | None:
    # The client's secrets (the live key) stay out of telemetry as out of recordings.
    secrets = secrets_of(client) if client is not None else []
    for plugin in plugins:
        session = plugin.open_session(args, environ, clock=clock, origin_unix_nano=origin_unix_nano,
                                      secrets=secrets)
        if session is not None:
            return session
    return None


def shift_command(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO, err: TextIO, *,
               plugins: Sequence[CliPlugin], new_id: Callable[[], str]) -> int:
    script = read_script(args.script) if args.script is not None else list(DEFAULT_SCRIPT)
    decisions = [parse_decision(d) for d in args.decision] if args.decision else list(DEFAULT_DECISIONS)
    seed, rng = _seeded(args.seed)
    # The seed fixes what the shift says, not which conversation it is: each gets its own id.
    conversation_id = new_id()
    # One clock for the spans and the recording: call starts are generation starts.
    timeline = Timeline()
    origin_ns = timeline.origin_unix_nano
    client = get_client(environ)
    session = _open_telemetry(plugins, args, environ, clock=timeline, origin_unix_nano=origin_ns, client=client)
    tracer = session.tracer if session else Tracer(clock=timeline)
    options = {"max_turns": args.max_turns, "conversation_id": conversation_id}
    try:
        if args.record:
            run, _ = record_shift(
                client, script, args.record, responder=make_responder(decisions), tracer=tracer,
                mode=args.record_mode, decisions=decisions, seed=seed,
                scrubber=Scrubber.from_environment(environ), timeline=timeline, **options,
            )
        else:
            run = run_shift(client, script, make_responder(decisions), tracer=tracer, **options)
    finally:
        report = session.close() if session else []
    # The note's clock is the shift's start, so a replay of the recording writes it again.
    note = handover_note(run, clock=lambda: origin_ns / 1e9, rng=rng)
    _print_shift(out, run, tracer, note)
    out.write(f"seed: {seed}\n")
    if args.record:
        out.write(f"recorded {run.model_calls} call(s) to {args.record}\n")
    for line in session.notes() if session else []:
        out.write(line + "\n")
    for line in report:
        err.write(line + "\n")
    return 0


def _check_transcript(recording: Recording, run: ShiftRun) -> None:
    if recording.ending is None:
        return
    if transcript_digest(run) == recording.ending.transcript_sha256:
        return
    last = recording.calls[-1] if recording.calls else None
    recorded = [*last.request["messages"], last.response["choices"][0]["message"]] if last else []
    ours = transcript(run.messages[: len(recorded)]).splitlines()
    theirs = transcript(recorded).splitlines()
    replayed = transcript(run).splitlines()
    for number, (a, b) in enumerate(zip(theirs, ours, strict=False), start=1):
        if a != b:
            raise TranscriptMismatch(recording.path, f"first difference at transcript line {number}",
                                     transcripts=(theirs, replayed), line=number)
    raise TranscriptMismatch(
        recording.path,
        f"the conversations agree up to the last model call; they differ after it "
        f"(recorded stop reason {recording.ending.stop_reason}, replayed {run.stop_reason})",
        transcripts=(theirs, replayed), line=len(theirs) + 1 if len(replayed) > len(theirs) else None,
    )


def _write_report(page: str, recording: Recording, error: ReplayError, environ: Mapping[str, str],
                  out: TextIO, err: TextIO) -> None:
    """The mismatch page of `error`, or a line saying why there is none: the replay's own
    error, printed after, is what the command exits with either way."""
    try:
        view.write_mismatch_report(page, recording, error, Scrubber.from_environment(environ))
    except CafeError as unwritable:
        err.write(f"cafe: no mismatch report: {one_line(unwritable)}\n")
        return
    except Exception as failure:  # a page too large for memory, JSON nested past the stack
        if environ.get(DEBUG_VARIABLE):
            raise
        err.write(f"cafe: no mismatch report: {page}: the page could not be drawn ({type(failure).__name__})\n")
        return
    out.write(f"wrote the mismatch report {page} (private, mode 0600)\n")


def replay_command(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO, err: TextIO, *,
                plugins: Sequence[CliPlugin]) -> int:
    recording = load_recording(args.path, allow_truncated=args.allow_truncated)
    _, rng = _seeded(recording.header.seed or 0)
    origin_ns = recording.header.clock_origin_unix_nano or 0
    explicit: dict[str, Any] = {}  # the conversation id is the recorded one (replay_shift)
    if args.max_turns is not None:
        explicit["max_turns"] = args.max_turns
    responder = make_responder([parse_decision(d) for d in args.decision]) if args.decision else None
    if args.report:
        view.check_page_path(args.report)  # before the replay, not after it failed
    # A replay's spans, exported or drawn by --show, sit on the recorded call windows: the
    # timings the recording holds, the same every time it is replayed.
    recorded_clock = RecordedClock(call_windows(recording))
    session = _open_telemetry(plugins, args, environ, clock=recorded_clock,
                              origin_unix_nano=recorded_clock.origin_unix_nano)
    tracer = session.tracer if session else Tracer(clock=recorded_clock)
    try:
        run, _ = replay_shift(
            recording,
            read_script(args.script) if args.script is not None else None,
            responder=responder,
            tracer=tracer,
            recorded_clock=recorded_clock,
            ignore=args.ignore,
            scrubber=Scrubber.from_environment(environ),
            environ=environ,
            **explicit,
        )
    except ReplayError as error:
        if args.report:
            _write_report(args.report, recording, error, environ, out, err)
        raise
    finally:
        report = session.close() if session else []
    for line in report:
        err.write(line + "\n")
    try:
        _check_transcript(recording, run)
    except TranscriptMismatch as error:
        if args.report:
            _write_report(args.report, recording, error, environ, out, err)
        raise
    if args.show:
        _print_shift(out, run, tracer, handover_note(run, clock=lambda: origin_ns / 1e9, rng=rng))
    matched = ("transcript matches" if recording.ending else
               "no end line recorded (the shift did not finish): stopped after its last recorded call")
    out.write(
        f"replayed {run.model_calls} call(s) from {args.path} with 0 model calls: {matched}; "
        f"every recorded call used; stop reason {run.stop_reason}\n"
    )
    for line in session.notes() if session else []:
        out.write(line + "\n")
    return 0


Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _add_shift(commands: Commands, plugins: Sequence[CliPlugin],
               new_id: Callable[[], str]) -> argparse.ArgumentParser:
    shift = commands.add_parser("shift", help="run a shift (offline unless CAFE_MODE=live)")
    shift.add_argument("--script", type=script_to_read, help="customer lines, one per line (default: a two-line order)")
    shift.add_argument("--record", metavar="PATH", type=recording_to_write,
                       help="record every model call to PATH (JSONL)")
    shift.add_argument("--record-mode", choices=["once", "all"], default="once",
                       help="once: never overwrite a recording (default); all: re-record")
    shift.add_argument("--decision", action="append", metavar="D",
                       help="the synthetic customer's consent decisions in order: approve, "
                            "reject, or edit=JSON (default: approve once)")
    shift.add_argument("--seed", type=int, help="seed for the shift's RNG (default: random, printed)")
    shift.add_argument("--max-turns", type=positive, default=8, help="turn cap (default 8)")
    shift.set_defaults(run=functools.partial(shift_command, plugins=plugins, new_id=new_id))
    return shift


def _add_replay(commands: Commands, plugins: Sequence[CliPlugin]) -> argparse.ArgumentParser:
    replay = commands.add_parser("replay", help="replay a recording with zero model calls")
    replay.add_argument("path", type=file_to_read, help="the recording to replay")
    replay.add_argument("--script", type=script_to_read, help="customer lines (default: those the recording holds)")
    replay.add_argument("--ignore", action="append", default=[], metavar="FIELD.PATH",
                        help="a request field to ignore when matching, e.g. messages.*.tool_call_id")
    replay.add_argument("--allow-truncated", action="store_true",
                        help="replay the complete calls of a recording whose last line was cut short")
    replay.add_argument("--max-turns", type=positive, default=None,
                        help="turn cap (default: the one the recording was made with)")
    replay.add_argument("--decision", action="append", metavar="D",
                        help="consent decisions in order (default: those the recording holds)")
    replay.add_argument("--show", action="store_true", help="print the transcript and span tree")
    replay.add_argument("--report", metavar="HTML", type=page_to_write,
                        help="on a failed replay, write a page of the mismatch to HTML (private: 0600, never "
                             "overwritten)")
    replay.set_defaults(run=functools.partial(replay_command, plugins=plugins))
    return replay


class CounterPlugin:
    """The café example on the `cafe` command: `cafe shift` and `cafe replay`, each a command
    that runs an agent (telemetry plugins add their options to both)."""

    name = "counter"
    order = -10  # before the plugins that add options to its commands

    def register(self, commands: Commands, context: CommandContext) -> None:
        shift = _add_shift(commands, context.plugins, context.new_conversation_id)
        replay = _add_replay(commands, context.plugins)
        context.run_parsers.extend([shift, replay])

    def open_session(self, args: argparse.Namespace, environ: Mapping[str, str], *, clock: Clock | None,
                     origin_unix_nano: int | None, secrets: Sequence[str] = ()) -> TelemetrySession | None:
        return None


plugin = CounterPlugin()
