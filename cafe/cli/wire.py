"""`cafe record REC -- CMD...` and `cafe replay-run REC -- CMD...`: record or replay the
httpx2 calls (the `openai` SDK's) of an unchanged Python program, through the hook in
`cafe.wire._hook`.

The recording is made beside REC and moved into place only when the program succeeded, so
a failed run never leaves a recording to be replayed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from cafe.errors import CafeError, UsageError
from cafe.recording.errors import RecordingError, ReplayError
from cafe.recording.modes import RecordMode
from cafe.wire._hook import STATUS_FILE, hook_directory, program_environ, read_status


class ProgramNotStarted(CafeError):
    """The program given after `--` could not be started."""

    exit_code = 24


class ReplayUnchecked(ReplayError):
    """The program ended without cafe's check at its exit (it was killed, ended with
    `os._exit`, or its Python could not import cafe): whether it made the recorded calls is
    not known."""

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
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError(f"cafe {args.subcommand}: no program to run: write the command after --, "
                         f"e.g. `cafe {args.subcommand} {args.recording} -- python agent.py`")
    return command


def _exit_note(code: int) -> str:
    return f"killed by signal {-code}" if code < 0 else f"exited {code}"


def _exit_code(code: int) -> int:
    return 128 - code if code < 0 else code


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
    try:
        made = hook / "recording.jsonl"
        plan = {"action": "record", "recording": str(made), "status": str(hook / STATUS_FILE)}
        code = _run(command, program_environ(environ, hook, plan))
        status = read_status(hook / STATUS_FILE)
        if status is not None and "error" in status:
            raise _Reported(status)
        kept = made if made.exists() else partial_path(made)
        if code != 0 or status is None or not made.exists():
            if kept.exists():
                os.replace(kept, partial)
                where = f"; its calls are kept in {partial}"
            else:
                where = ""
            why = _exit_note(code) if code != 0 else "ended without cafe's check at its exit"
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
        out.write(f"recorded {status.get('calls', 0)} call(s) to {target}\n")
        return 0
    finally:
        shutil.rmtree(hook, ignore_errors=True)


def replay_run_command(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    from cafe.recording.reader import load_recording
    from cafe.wire._replay import ReplayTransport, checked_ignore

    command = _command(args)
    recording = load_recording(args.recording, allow_truncated=args.allow_truncated)
    ReplayTransport(recording)  # refuses a recording without HTTP exchanges, naming how to replay it
    checked_ignore(recording.path, args.ignore)
    hook = hook_directory(Path(tempfile.gettempdir()))
    try:
        plan = {"action": "replay", "recording": str(Path(args.recording).resolve()), "status": str(hook / STATUS_FILE),
                "ignore": list(args.ignore), "allow_truncated": bool(args.allow_truncated)}
        code = _run(command, program_environ(environ, hook, plan))
        status = read_status(hook / STATUS_FILE)
    finally:
        shutil.rmtree(hook, ignore_errors=True)
    if status is not None and "error" in status:
        raise _Reported(status)
    if status is None:
        raise ReplayUnchecked(f"{args.recording}: the program {_exit_note(code)} without cafe's check at its exit "
                              "(killed, os._exit, or not a Python program): whether it made the recorded calls "
                              "is unknown")
    if code != 0:
        err.write(f"cafe: the program {_exit_note(code)}; every recorded call was used\n")
        return _exit_code(code)
    out.write(f"replayed {status.get('calls', 0)} call(s) from {args.recording}: every recorded call used\n")
    return 0


class _Reported(CafeError):
    """A failure the hook reported from the program's interpreter, with its exit code."""

    def __init__(self, status: Mapping[str, Any]) -> None:
        code = status.get("exit_code")
        self.exit_code = code if isinstance(code, int) and 1 <= code <= 125 else 30
        super().__init__(str(status.get("error")))
