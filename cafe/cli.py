"""The `cafe` command: run a shift, replay a recording, and whatever plugins add.

Errors are one line on stderr and a distinct exit code (see `CafeError.exit_code`),
never a traceback. Set CAFE_DEBUG=1 to see the traceback of an unexpected failure.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import random
import re
import secrets
import stat
import sys
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from typing import Any, NoReturn, TextIO, cast

from cafe import view
from cafe.argtypes import attach_values, file_to_read, path_argument
from cafe.clients.base import ChatClient, secrets_of
from cafe.clients.choose import get_client
from cafe.consent import DECISIONS, Decision, make_responder
from cafe.demo import DEFAULT_DECISIONS, DEFAULT_SCRIPT
from cafe.errors import CafeError, ScriptError, UsageError
from cafe.handover import handover_note
from cafe.loop import ShiftRun, new_conversation_id, run_shift
from cafe.plugins import CliPlugin, PluginLoader, TelemetrySession, installed_plugins
from cafe.privacy import Scrubber
from cafe.recording import check as recording_check
from cafe.recording.errors import ReplayError, TranscriptMismatch
from cafe.recording.format import Recording
from cafe.recording.reader import load_recording
from cafe.recording.shift import record_shift, replay_shift
from cafe.recording.windows import RecordedClock, call_windows
from cafe.termination import EXIT_TERMINATED, Terminated, terminated_as_interrupt
from cafe.trace.clock import Clock, TickClock, Timeline
from cafe.trace.tracer import Tracer
from cafe.trace.usage import usage_of
from cafe.transcript import transcript, transcript_digest
from cafe.wire import _cli as wire_cli

EXIT_INTERNAL = 70
DISTRIBUTION = "cafe_otel"  # the distribution cafe ships in (pyproject's name, normalised)


MAX_SCRIPT_BYTES = 1024 * 1024


def _read_bounded(path: str) -> bytes:
    """The file's bytes, if it is a regular file of at most MAX_SCRIPT_BYTES: opened without
    blocking (a FIFO would wait for a writer forever) and read no further than the bound
    (/dev/zero never ends)."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(descriptor, "rb") as source:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise ScriptError(f"{path}: a script must be a regular file (this is a FIFO, device or directory)")
        data = source.read(MAX_SCRIPT_BYTES + 1)
    if len(data) > MAX_SCRIPT_BYTES:
        raise ScriptError(f"{path}: the script is longer than {MAX_SCRIPT_BYTES} bytes")
    return data


def _read_script(path: str) -> list[str]:
    try:
        text = _read_bounded(path).decode("utf-8")
    except FileNotFoundError:
        raise ScriptError(f"{path}: no such script file") from None
    except (UnicodeDecodeError, OSError) as error:
        raise ScriptError(f"{path}: cannot be read as a UTF-8 text script ({type(error).__name__})") from None
    lines = [line.strip() for line in text.splitlines()]
    script = [line for line in lines if line and not line.startswith("#")]
    if not script:
        raise ScriptError(f"{path}: the script has no customer lines (one line per turn; # comments)")
    return script


MAX_DECISION_CHARS = 64 * 1024
MAX_DECISION_DEPTH = 16


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def _not_a_number(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def _parse_decision(text: str) -> Decision:
    kind, _, payload = text.partition("=")
    if kind not in DECISIONS:
        raise ScriptError(f"--decision: {len(kind)} characters before '=' are not a decision; "
                          "use approve, reject or edit=JSON")
    if kind != "edit":
        if payload:
            raise ScriptError(f"--decision {kind}: takes no payload (only edit=JSON does)")
        return (kind, None)
    if len(payload) > MAX_DECISION_CHARS:
        raise ScriptError(f"--decision edit=...: the payload is longer than {MAX_DECISION_CHARS} characters")
    try:
        value = json.loads(payload, parse_constant=_not_a_number)
    except json.JSONDecodeError as error:
        raise ScriptError(f"--decision edit=...: the payload is not JSON ({error.msg})") from None
    except (ValueError, RecursionError):
        raise ScriptError("--decision edit=...: the payload is not plain JSON (NaN, Infinity, "
                          "an overlong number or nesting too deep)") from None
    if not isinstance(value, dict) or _depth(value) > MAX_DECISION_DEPTH:
        raise ScriptError("--decision edit=...: the payload must be a JSON object (the edited order, "
                          'e.g. {"items": ["latte"], "table": 4}), at most '
                          f"{MAX_DECISION_DEPTH} levels deep")
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:  # 1e999 reads as an infinite float
        raise ScriptError("--decision edit=...: the payload holds a number too large for JSON") from None
    return (kind, value)


_recording_path = path_argument("a file path to record to")
_script_path = path_argument("a file of customer lines")
_page_path = path_argument("a file path for the page")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


class _VersionAsked(Exception):
    """`--version` was given: main prints it on its own stream and exits 0."""


class _ShowVersion(argparse.Action):
    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        raise _VersionAsked


def version() -> str:
    """The installed distribution's version, or `unknown` when cafe runs from a source tree
    that was never installed."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"


class _Parser(argparse.ArgumentParser):
    """argparse writes its usage block before an error and exits; cafe's errors are one line
    with their exit code (2 for usage), so a bad argument is raised like any other error.
    Subcommand parsers (plugins' included) are made of the same class."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see `{self.prog} --help`)")


def _build_parser(plugins: Sequence[CliPlugin],
                  new_id: Callable[[], str] = new_conversation_id) -> argparse.ArgumentParser:
    """The `cafe` parser. Every command, a plugin's included, sets `run(args, environ, out, err)`:
    main calls it and nothing else."""
    parser = _Parser(prog="cafe", description=(__doc__ or "cafe").splitlines()[0])
    parser.add_argument("--version", action=_ShowVersion, help="print cafe's version and exit")
    # Its parsers are _Parsers; registrars take any ArgumentParser's subcommands.
    commands = cast("argparse._SubParsersAction[argparse.ArgumentParser]",
                    parser.add_subparsers(dest="command", required=True))

    shift = commands.add_parser("shift", help="run a shift (offline unless CAFE_MODE=live)")
    shift.add_argument("--script", type=_script_path, help="customer lines, one per line (default: a two-line order)")
    shift.add_argument("--record", metavar="PATH", type=_recording_path,
                       help="record every model call to PATH (JSONL)")
    shift.add_argument("--record-mode", choices=["once", "all"], default="once",
                       help="once: never overwrite a recording (default); all: re-record")
    shift.add_argument("--decision", action="append", metavar="D",
                       help="the synthetic customer's consent decisions in order: approve, "
                            "reject, or edit=JSON (default: approve once)")
    shift.add_argument("--seed", type=int, help="seed for the shift's RNG (default: random, printed)")
    shift.add_argument("--max-turns", type=_positive, default=8, help="turn cap (default 8)")

    shift.set_defaults(run=functools.partial(_cmd_shift, plugins=plugins, new_id=new_id))

    replay = commands.add_parser("replay", help="replay a recording with zero model calls")
    replay.set_defaults(run=functools.partial(_cmd_replay, plugins=plugins))
    replay.add_argument("path", type=file_to_read, help="the recording to replay")
    replay.add_argument("--script", type=_script_path, help="customer lines (default: those the recording holds)")
    replay.add_argument("--ignore", action="append", default=[], metavar="FIELD.PATH",
                        help="a request field to ignore when matching, e.g. messages.*.tool_call_id")
    replay.add_argument("--allow-truncated", action="store_true",
                        help="replay the complete calls of a recording whose last line was cut short")
    replay.add_argument("--max-turns", type=_positive, default=None,
                        help="turn cap (default: the one the recording was made with)")
    replay.add_argument("--decision", action="append", metavar="D",
                        help="consent decisions in order (default: those the recording holds)")
    replay.add_argument("--show", action="store_true", help="print the transcript and span tree")
    replay.add_argument("--report", metavar="HTML", type=_page_path,
                        help="on a failed replay, write a page of the mismatch to HTML (private: 0600, never "
                             "overwritten)")

    recording_check.register(commands)
    view.register(commands)
    wire_cli.register(commands)  # cafe record, cafe replay-run: any program on the wire
    for plugin in plugins:
        plugin.register(commands, [shift, replay])
    return parser


def _seeded(seed: int | None) -> tuple[int, random.Random]:
    seed = secrets.randbits(32) if seed is None else seed
    return seed, random.Random(seed)


# Control characters (terminal escape sequences, a carriage return, a bell) and lone
# surrogates, which have no UTF-8 form: customer lines, model replies and file names carry
# them, and printed raw they would drive the reader's terminal or fail the write.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every control character but newline and tab, and every lone surrogate,
    shown as an escape: what cafe prints on a terminal."""
    return _UNPRINTABLE.sub(_escape, text)


class _Escaping:
    """A text stream whose writes are `printable`: every command's output (plugins' too)
    reaches the terminal through one, whatever recording, file name or reply it quotes.

    A reader that closes the pipe (`cafe shift | head -1`) ends the output, not the
    command: the rest is dropped and the command finishes its work (a recording is
    completed, telemetry shut down) and exits with its own code, as `head`'s writer would
    want. The process's own stream is then pointed at /dev/null, as the Python docs advise,
    so that the interpreter's last flush finds no broken pipe to complain about."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.reader_gone = False

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                self._stream.write(printable(text))
            except BrokenPipeError:
                self._drop_the_rest()
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._drop_the_rest()

    def _drop_the_rest(self) -> None:
        self.reader_gone = True
        if self._stream is not sys.stdout and self._stream is not sys.stderr:
            return  # a stream handed in: its descriptor is not ours to move
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


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


def _cmd_shift(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO, err: TextIO, *,
               plugins: Sequence[CliPlugin], new_id: Callable[[], str]) -> int:
    script = _read_script(args.script) if args.script is not None else list(DEFAULT_SCRIPT)
    decisions = [_parse_decision(d) for d in args.decision] if args.decision else list(DEFAULT_DECISIONS)
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
        err.write(f"cafe: no mismatch report: {_one_line(unwritable)}\n")
        return
    except Exception as failure:  # a page too large for memory, JSON nested past the stack
        if environ.get("CAFE_DEBUG"):
            raise
        err.write(f"cafe: no mismatch report: {page}: the page could not be drawn ({type(failure).__name__})\n")
        return
    out.write(f"wrote the mismatch report {page} (private, mode 0600)\n")


def _cmd_replay(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO, err: TextIO, *,
                plugins: Sequence[CliPlugin]) -> int:
    recording = load_recording(args.path, allow_truncated=args.allow_truncated)
    _, rng = _seeded(recording.header.seed or 0)
    origin_ns = recording.header.clock_origin_unix_nano or 0
    explicit: dict[str, Any] = {}  # the conversation id is the recorded one (replay_shift)
    if args.max_turns is not None:
        explicit["max_turns"] = args.max_turns
    responder = make_responder([_parse_decision(d) for d in args.decision]) if args.decision else None
    if args.report:
        view.check_page_path(args.report)  # before the replay, not after it failed
    # With telemetry, a replay's spans sit on the recording's own timeline, one tick a second
    # after its origin, so replaying twice exports the same timestamps; without it, the tree
    # --show draws is on the recorded call windows.
    session = _open_telemetry(plugins, args, environ, clock=TickClock(), origin_unix_nano=origin_ns)
    recorded_clock = None if session else RecordedClock(call_windows(recording))
    tracer = session.tracer if session else Tracer(clock=recorded_clock)
    try:
        run, _ = replay_shift(
            recording,
            _read_script(args.script) if args.script is not None else None,
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


def _one_line(error: BaseException, text: str | None = None) -> str:
    """The error and its notes (where a failed recording left its calls) on one line."""
    parts = [str(error) if text is None else text, *getattr(error, "__notes__", ())]
    return "; ".join(part.replace("\n", " ") for part in parts if part)


def main(
    argv: Sequence[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    load_plugins: PluginLoader = installed_plugins,
    new_conversation_id: Callable[[], str] = new_conversation_id,
) -> int:
    """`new_conversation_id` gives each shift its `gen_ai.conversation.id`."""
    environ = os.environ if environ is None else environ
    streams = _Escaping(out or sys.stdout), _Escaping(err or sys.stderr)
    try:
        return _main(argv, environ, *streams, load_plugins, new_conversation_id)
    finally:
        for stream in streams:  # a closed pipe is found here at the latest, not at exit
            stream.flush()


def _main(argv: Sequence[str] | None, environ: Mapping[str, str], escaping_out: _Escaping,
          escaping_err: _Escaping, load_plugins: PluginLoader, new_conversation_id: Callable[[], str]) -> int:
    out, err = cast(TextIO, escaping_out), cast(TextIO, escaping_err)
    try:
        def warn(line: str) -> None:
            err.write(line + "\n")

        with terminated_as_interrupt():
            plugins = load_plugins(warn)
            parser = _build_parser(plugins, new_conversation_id)
            args = parser.parse_args(attach_values(parser, sys.argv[1:] if argv is None else argv))
            code: int = args.run(args, environ, out, err)
            return code
    except _VersionAsked:
        out.write(f"cafe {version()}\n")
        return 0
    except CafeError as error:
        err.write(f"cafe: error: {_one_line(error)}\n")
        return error.exit_code
    except KeyboardInterrupt as error:
        if isinstance(error, Terminated):
            err.write(f"cafe: {_one_line(error, 'terminated (SIGTERM)')}\n")
            return EXIT_TERMINATED
        err.write(f"cafe: {_one_line(error, 'interrupted')}\n")
        return 130
    except Exception as error:
        if environ.get("CAFE_DEBUG"):
            raise
        err.write(
            f"cafe: internal error ({type(error).__name__}); set CAFE_DEBUG=1 for the traceback\n"
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
