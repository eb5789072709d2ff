"""`cafe record REC -- CMD...` and `cafe replay-run REC -- CMD...`: record or replay the
httpx and httpx2 calls (the `openai` SDK's, whichever it uses) of an unchanged Python program,
through the hook in `cafe.wire._hook`.

The recording is made in a directory beside REC and moved into place only when the program
succeeded, so a failed run never leaves a recording to be replayed; whatever the run's end,
the calls it recorded are moved to `REC.partial` before that directory is removed. What the
commands say of themselves goes to stderr: stdout is the program's.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from cafe.errors import CafeError, UsageError
from cafe.recording.errors import RecordingError, ReplayError, UnusedCalls
from cafe.recording.modes import RecordMode
from cafe.wire._hook import (
    PROBE_FILE,
    HookNotLoaded,
    HookOutcome,
    hook_directory,
    program_environ,
    read_outcome,
    remove_hook_directory,
)


class ProgramNotStarted(CafeError):
    """The program given after `--` could not be started."""

    exit_code = 24


class ReplayUnchecked(ReplayError):
    """The program ended without cafe's check at its exit (it was killed, ended with
    `os._exit`, or never loaded cafe's hook): whether it made the recorded calls is not
    known."""

    exit_code = 50


def _run(command: Sequence[str], environ: Mapping[str, str]) -> int:
    try:
        return subprocess.run(list(command), env=dict(environ), check=False).returncode
    except FileNotFoundError:
        raise ProgramNotStarted(f"{command[0]}: no such program (the command after --)") from None
    except PermissionError:
        raise ProgramNotStarted(f"{command[0]}: not executable (the command after --)") from None
    except OSError as error:
        raise ProgramNotStarted(f"{command[0]}: cannot be started ({type(error).__name__})") from None


def _command(args: argparse.Namespace) -> list[str]:
    """The program after `--`; options of the command's own written between REC and `--`
    (`cafe record REC --record-mode all -- CMD`) are parsed as the command's."""
    command = list(args.command)
    if "--" in command:
        at = command.index("--")
        if at:
            _parse_options(args, command[:at])
        command = command[at + 1:]
    elif command and command[0].startswith("-"):
        raise UsageError(f"cafe {args.subcommand}: {command[0]}: write the program after --, and the command's "
                         f"options before it, e.g. `cafe {args.subcommand} {args.recording} {command[0]} ... -- "
                         "python agent.py`")
    if not command:
        raise UsageError(f"cafe {args.subcommand}: no program to run: write the command after --, "
                         f"e.g. `cafe {args.subcommand} {args.recording} -- python agent.py`")
    return command


def _parse_options(args: argparse.Namespace, words: list[str]) -> None:
    options: argparse.ArgumentParser = args.options
    _, rest = options.parse_known_args(words, namespace=args)
    if rest:
        raise UsageError(f"cafe {args.subcommand}: {rest[0]}: not an option of cafe {args.subcommand} (the "
                         "program goes after --)")


_PYTHON = re.compile(r"(python|pypy)[0-9.]*(\.exe)?", re.IGNORECASE)
_TAKES_VALUE = frozenset("WX")  # -W ARG, -X ARG
_ENDS_OPTIONS = frozenset("cm")  # -c CODE, -m MODULE: the program starts there


def _interpreter_options(command: Sequence[str]) -> tuple[list[str], set[str]] | None:
    """The interpreter's options, and the letters of its one-letter flags, when the program
    is a Python started directly (`python -I agent.py`); None for any other program."""
    if not _PYTHON.fullmatch(os.path.basename(command[0])):
        return None
    options: list[str] = []
    flags: set[str] = set()
    words = iter(command[1:])
    for word in words:
        if not word.startswith("-") or word in ("-", "--"):
            break
        if word.startswith("--"):  # a long option: --version, --help
            options.append(word)
            continue
        for position, letter in enumerate(word[1:], start=1):
            if letter in _ENDS_OPTIONS:  # the program starts here: its code or module follows
                if position > 1:
                    options.append(word[:position])
                return options, flags
            flags.add(letter)
            if letter in _TAKES_VALUE:
                options.append(word)
                if position == len(word) - 1:
                    options.append(next(words, ""))
                break
        else:
            options.append(word)
    return options, flags


def _check_hook_loads(command: Sequence[str], environ: Mapping[str, str], hook: Path) -> None:
    """Refuse, before it runs, a Python started so that it would skip cafe's hook: `-S` (no
    startup file runs), or `-I`/`-E` (PYTHONPATH is ignored) in a Python whose site-packages
    lacks cafe's startup file. The same interpreter, with the same options, is asked."""
    found = _interpreter_options(command)
    if found is None or not found[1] & set("IES"):
        return  # PYTHONPATH is read: the sitecustomize there starts the hook, or stops a Python without cafe
    options, flags = found
    probe = [command[0], *options, "-c", "pass"]
    try:
        subprocess.run(probe, env=program_environ(environ, hook, {"action": "probe"}), check=False, timeout=60,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return  # the program's own start says what is wrong with it
    if not (hook / PROBE_FILE).exists():
        why = ("-S skips every startup file, cafe's hook included" if "S" in flags else
               "-I and -E skip PYTHONPATH, and cafe's startup file is not installed in this Python")
        shown = " ".join([os.path.basename(command[0]), *options])
        raise HookNotLoaded(f"{shown}: the program is not run: this Python would run it without cafe's hook ({why}); "
                            "run it without that option, or with the Python cafe is installed in")


def _exit_note(code: int) -> str:
    return f"killed by signal {-code}" if code < 0 else f"exited {code}"


def _exit_code(code: int) -> int:
    return 128 - code if code < 0 else code


def _holds_calls(path: Path) -> bool:
    """Whether a recording being made holds a call: a line after its header."""
    try:
        with open(path, "rb") as lines:
            return sum(1 for _, line in zip(range(2), lines, strict=False) if line.endswith(b"\n")) >= 2
    except OSError:
        return False


def _keep_calls(made: Path, partial: Path) -> Path | None:
    """Move the calls the program recorded in the hook's directory to `partial`; where they
    are kept, or None when it recorded none."""
    from cafe.recording.writer import partial_path

    for found in (made, partial_path(made)):
        if _holds_calls(found):
            os.replace(found, partial)
            return partial
    return None


def record_command(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    from cafe._files import link_no_clobber
    from cafe.recording.writer import check_target, partial_path

    command = _command(args)
    target = Path(args.recording)
    mode = RecordMode.parse(args.record_mode)
    check_target(target, mode)  # before the program runs, not after
    partial = partial_path(target)
    if os.path.lexists(partial):
        raise RecordingError(f"{target}: {partial} exists: an earlier recording of it was interrupted and left "
                             "its calls there (remove it, or replay them with `cafe replay-run "
                             f"{partial} --allow-truncated -- ...`)")
    hook = hook_directory(target.parent if str(target.parent) else Path("."))
    made = hook / "recording.jsonl"
    placed = False
    try:
        _check_hook_loads(command, environ, hook)
        plan = {"action": "record", "recording": str(made), "shown": str(target)}
        code = _run(command, program_environ(environ, hook, plan))
        outcome = read_outcome(hook)
        failure = outcome.failure
        if failure is not None or code != 0 or outcome.status is None or not made.exists():
            kept = _keep_calls(made, partial)
            where = f"; its calls are kept in {partial}" if kept else ""
            if failure is not None:
                raise _Reported(failure, {str(made): str(target)}, f"nothing recorded at {target}{where}")
            why = _exit_note(code) if code != 0 else f"ended {_unchecked(outcome)}"
            err.write(f"cafe: the program {why}: nothing recorded at {target}{where}\n")
            return _exit_code(code) if code != 0 else ReplayUnchecked.exit_code
        if mode is RecordMode.ALL:
            os.replace(made, target)
        else:
            try:
                link_no_clobber(made, target)
            except FileExistsError:
                os.replace(made, partial)
                raise RecordingError(f"{target}: a recording appeared there while the program ran; this run's "
                                     f"calls are kept in {partial}") from None
        placed = True
        err.write(f"cafe: recorded {outcome.status.get('calls', 0)} call(s) to {target}{_unused_libraries(outcome)}\n")
        return 0
    finally:
        if not placed and not os.path.lexists(partial):
            _keep_calls(made, partial)  # interrupted: what was recorded outlives the directory
        remove_hook_directory(hook)


def _unchecked(outcome: HookOutcome) -> str:
    """How a program ended that left no status: whether cafe's hook was ever loaded."""
    if outcome.owner is None:
        return "without loading cafe's hook (not a Python program, or a Python that skips its startup files)"
    return "without cafe's check at its exit (killed, or os._exit)"


def replay_run_command(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    from cafe.recording.reader import load_recording
    from cafe.wire._replay import WireReplay, checked_ignore

    command = _command(args)
    recording = load_recording(args.recording, allow_truncated=args.allow_truncated)
    WireReplay(recording)  # refuses a recording without HTTP exchanges, naming how to replay it
    checked_ignore(recording.path, args.ignore)
    hook = hook_directory(Path(tempfile.gettempdir()))
    resolved = str(Path(args.recording).resolve())
    try:
        _check_hook_loads(command, environ, hook)
        plan = {"action": "replay", "recording": resolved, "shown": str(args.recording),
                "ignore": list(args.ignore), "allow_truncated": bool(args.allow_truncated)}
        code = _run(command, program_environ(environ, hook, plan))
        outcome = read_outcome(hook)
    finally:
        remove_hook_directory(hook)
    failure = outcome.failure
    if failure is not None:
        unused = failure.get("exit_code") == UnusedCalls.exit_code
        raise _Reported(failure, {resolved: str(args.recording)}, _unused_libraries(outcome)[2:] if unused else "")
    if outcome.status is None:
        raise ReplayUnchecked(f"{args.recording}: the program {_exit_note(code)} {_unchecked(outcome)}: "
                              "whether it made the recorded calls is unknown")
    if code != 0:
        err.write(f"cafe: the program {_exit_note(code)}; every recorded call was used\n")
        return _exit_code(code)
    err.write(f"cafe: replayed {outcome.status.get('calls', 0)} call(s) from {args.recording}: every recorded call "
              f"used{_unused_libraries(outcome)}\n")
    return 0


def _unused_libraries(outcome: HookOutcome) -> str:
    """`; no call went through httpx or httpx2 ...` when the program's Python imported neither
    library (the hook's status says which it patched), else nothing."""
    from cafe.wire._libraries import NO_CALL

    status = outcome.status or {}
    if status.get("libraries") != [] or status.get("calls"):
        return ""
    return f"; {NO_CALL} (the program imported neither: cafe records and replays the calls made through them)"


class _Reported(CafeError):
    """A failure a process of the program reported through the hook, with its exit code: the
    hook's own paths in its text are the ones the user named (`renamed`), and `tail` says
    what became of the recording."""

    def __init__(self, status: Mapping[str, Any], renamed: Mapping[str, str] | None = None,
                 tail: str = "") -> None:
        code = status.get("exit_code")
        self.exit_code = code if isinstance(code, int) and 1 <= code <= 125 else 30
        text = str(status.get("error"))
        for hook_path, shown in (renamed or {}).items():
            text = text.replace(hook_path, shown)
        super().__init__(f"{text}; {tail}" if tail else text)

