"""`cafe record REC -- CMD...` and `cafe replay-run REC -- CMD...`: record or replay the
httpx2 calls (the `openai` SDK's) of an unchanged Python program.

The program runs with a directory of cafe's first on its `PYTHONPATH`, holding a
`sitecustomize.py` that installs `cafe.wire`'s interception in its interpreter before its
own code runs (then runs the `sitecustomize` it shadows, if there is one). What to do comes
in the environment, which the hook removes at once, so a Python program the program starts
records and replays nothing. The hook writes what happened at the program's exit to a
status file the command reads: a replay's refusal, its unused calls, a recording that could
not be written. The recording is made beside REC and moved into place by this command only
when the program succeeded, so a failed run never leaves a recording to be replayed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from cafe.argtypes import file_to_read, path_argument
from cafe.errors import CafeError, Unwritable, UsageError
from cafe.recording.errors import RecordingError, ReplayError
from cafe.recording.modes import RecordMode

HOOK_VARIABLE = "CAFE_WIRE_RUN"  # JSON: what the hook does in the program's interpreter
_STATUS = "status.json"

SITECUSTOMIZE = '''"""cafe's hook (cafe record / cafe replay-run): installs cafe.wire, then runs the
sitecustomize this one shadows."""


def _cafe_wire_hook():
    import os

    plan = os.environ.pop("CAFE_WIRE_RUN", None)
    if plan is None:
        return
    import json

    plan = json.loads(plan)
    try:
        from cafe.wire._cli import run_hook
    except ImportError as error:
        with open(plan["status"], "w", encoding="utf-8") as status:
            json.dump({"error": "the program's Python cannot import cafe.wire (" + type(error).__name__
                       + "): run it with the Python cafe is installed in", "exit_code": 50}, status)
        return
    run_hook(plan)


def _shadowed_sitecustomize():
    import importlib.machinery
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    others = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_cafe_wire_hook()
_shadowed_sitecustomize()
'''


class ProgramNotStarted(CafeError):
    """The program given after `--` could not be started."""

    exit_code = 24


class ReplayUnchecked(ReplayError):
    """The program ended without cafe's check at its exit (it was killed, ended with
    `os._exit`, or its Python could not import cafe): whether it made the recorded calls is
    not known."""

    exit_code = 50


def _write_status(path: str, error: BaseException) -> None:
    code = error.exit_code if isinstance(error, CafeError) else 30
    with open(path, "w", encoding="utf-8") as status:
        json.dump({"error": str(error).replace("\n", " "), "exit_code": code}, status)


def run_hook(plan: Mapping[str, Any]) -> None:
    """In the program's interpreter: install the recorder or the replay, and check at exit."""
    import atexit

    from cafe.wire._intercept import WireLayer, install, uninstall

    status = str(plan["status"])
    try:
        if plan["action"] == "record":
            from cafe.wire._recorder import WireRecorder

            recorder = WireRecorder(plan["recording"], mode=RecordMode.ALL)
            layer = install(WireLayer((recorder,)))

            def finish_recording() -> None:
                uninstall(layer)
                try:
                    recorder.close()
                except (RecordingError, Unwritable) as error:
                    _write_status(status, error)
                    return
                with open(status, "w", encoding="utf-8") as out:
                    json.dump({"calls": recorder.calls}, out)

            atexit.register(finish_recording)
            return
        from cafe.wire._replay import ReplayTransport

        source = ReplayTransport(plan["recording"], ignore=plan.get("ignore", ()),
                                 allow_truncated=bool(plan.get("allow_truncated")))
        layer = install(WireLayer(source=source))

        def check_replay() -> None:
            uninstall(layer)
            try:
                if source.failure is not None:
                    raise source.failure
                source.assert_exhausted()
            except ReplayError as error:
                _write_status(status, error)
                return
            with open(status, "w", encoding="utf-8") as out:
                json.dump({"calls": source.served}, out)

        atexit.register(check_replay)
    except (RecordingError, Unwritable) as error:
        _write_status(status, error)


def _hook_directory(parent: Path) -> Path:
    directory = Path(tempfile.mkdtemp(prefix=".cafe-run-", dir=parent))
    (directory / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    return directory


def _program_environ(environ: Mapping[str, str], hook: Path, plan: dict[str, Any]) -> dict[str, str]:
    child = dict(environ)
    child["PYTHONPATH"] = os.pathsep.join([str(hook), *filter(None, [environ.get("PYTHONPATH")])])
    child[HOOK_VARIABLE] = json.dumps(plan)
    return child


def _run(command: Sequence[str], environ: Mapping[str, str]) -> int:
    try:
        return subprocess.run(list(command), env=dict(environ), check=False).returncode
    except FileNotFoundError:
        raise ProgramNotStarted(f"{command[0]}: no such program (the command after --)") from None
    except PermissionError:
        raise ProgramNotStarted(f"{command[0]}: not executable (the command after --)") from None
    except OSError as error:
        raise ProgramNotStarted(f"{command[0]}: cannot be started ({type(error).__name__})") from None


def _status(path: Path) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found


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


def _cmd_record(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO, err: TextIO) -> int:
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
    hook = _hook_directory(target.parent if str(target.parent) else Path("."))
    try:
        made = hook / "recording.jsonl"
        plan = {"action": "record", "recording": str(made), "status": str(hook / _STATUS)}
        code = _run(command, _program_environ(environ, hook, plan))
        status = _status(hook / _STATUS)
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


def _cmd_replay_run(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    from cafe.recording.reader import load_recording
    from cafe.wire._replay import ReplayTransport, checked_ignore

    command = _command(args)
    recording = load_recording(args.recording, allow_truncated=args.allow_truncated)
    ReplayTransport(recording)  # refuses a recording without HTTP exchanges, naming how to replay it
    checked_ignore(recording.path, args.ignore)
    hook = _hook_directory(Path(tempfile.gettempdir()))
    try:
        plan = {"action": "replay", "recording": str(Path(args.recording).resolve()), "status": str(hook / _STATUS),
                "ignore": list(args.ignore), "allow_truncated": bool(args.allow_truncated)}
        code = _run(command, _program_environ(environ, hook, plan))
        status = _status(hook / _STATUS)
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


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`cafe record` and `cafe replay-run`."""
    record = commands.add_parser(
        "record", help="run a Python program, recording its model calls (httpx2, the openai SDK's) to a file")
    record.add_argument("recording", metavar="REC", type=path_argument("a file path to record to"),
                        help="where to write the recording (JSONL, private: 0600)")
    record.add_argument("--record-mode", choices=["once", "all"], default="once",
                        help="once: never overwrite a recording (default); all: re-record")
    record.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ...",
                        help="the program to run, after --, e.g. -- python agent.py")
    record.set_defaults(run=_cmd_record, subcommand="record")

    replay = commands.add_parser(
        "replay-run", help="run a Python program, answering its model calls from a recording (no network)")
    replay.add_argument("recording", metavar="REC", type=file_to_read, help="the recording to answer from")
    replay.add_argument("--ignore", action="append", default=[], metavar="FIELD.PATH",
                        help="a request field to ignore when matching, e.g. metadata.run_id")
    replay.add_argument("--allow-truncated", action="store_true",
                        help="replay the complete calls of a recording whose last line was cut short")
    replay.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ...",
                        help="the program to run, after --, e.g. -- python agent.py")
    replay.set_defaults(run=_cmd_replay_run, subcommand="replay-run")

