"""The `cafe` parser: every command, its arguments and the function that runs it.

Each command sets `run(args, environ, out, err) -> exit code` with `set_defaults`, a
plugin's commands included, and `main` calls it and nothing else. Plugins register last,
and may add options to the shift-running commands (`shift`, `replay`).
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeAlias, cast

from cafe.cli.arguments import file_to_read, page_to_write, positive, recording_to_write, script_to_read
from cafe.cli.plugins import CliPlugin
from cafe.cli.recordings import check_recording_command, view_command
from cafe.cli.shift import replay_command, shift_command
from cafe.cli.wire import record_command, replay_run_command
from cafe.errors import UsageError
from cafe.loop import new_conversation_id

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
DESCRIPTION = "The `cafe` command: run a shift, replay a recording, and whatever plugins add."


ROOT_PROG = "cafe"


class VersionAsked(Exception):
    """`--version` was given: main prints it on its own stream and exits 0."""


class _ShowVersion(argparse.Action):
    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        raise VersionAsked


class CommandParser(argparse.ArgumentParser):
    """argparse writes its usage block before an error and exits; cafe's errors are one line
    with their exit code (2 for usage), so a bad argument is raised like any other error.
    Subcommand parsers (plugins' included) are made of the same class."""

    def error(self, message: str) -> NoReturn:
        # The line already starts "cafe: error: ": a subcommand names itself, `cafe` does not.
        where = f"{self.prog}: " if self.prog != ROOT_PROG else ""
        raise UsageError(f"{where}{message} (see `{self.prog} --help`)")


def build_parser(plugins: Sequence[CliPlugin],
                 new_id: Callable[[], str] = new_conversation_id) -> argparse.ArgumentParser:
    """The `cafe` parser, with `plugins`' commands and options; `new_id` gives each shift its
    conversation id."""
    parser = CommandParser(prog=ROOT_PROG, description=DESCRIPTION)
    parser.add_argument("--version", action=_ShowVersion, help="print cafe's version and exit")
    # Its parsers are CommandParsers; registrars take any ArgumentParser's subcommands.
    commands = cast(Commands, parser.add_subparsers(dest="command", required=True))
    shift = _add_shift(commands, plugins, new_id)
    replay = _add_replay(commands, plugins)
    _add_check_recording(commands)
    _add_view(commands)
    _add_record(commands)
    _add_replay_run(commands)
    for plugin in plugins:
        plugin.register(commands, [shift, replay])
    return parser


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


def _add_check_recording(commands: Commands) -> None:
    check = commands.add_parser(
        "check-recording",
        help="scan recordings for secrets and real-looking customer data before committing them",
    )
    check.add_argument("paths", nargs="+", metavar="PATH", type=file_to_read, help="recordings to scan")
    check.add_argument("--pattern", action="append", default=[], metavar="REGEX",
                       help="an extra secret pattern (also CAFE_SCRUB_PATTERNS, one per line)")
    check.set_defaults(run=check_recording_command)


def _add_view(commands: Commands) -> None:
    view = commands.add_parser("view", help="a recorded shift as one self-contained HTML page (private: 0600)")
    view.add_argument("path", type=file_to_read, help="the recording to show (any version cafe reads)")
    view.add_argument("-o", "--out", required=True, metavar="HTML", type=page_to_write,
                      help="the page to create (never overwritten)")
    view.add_argument("--allow-truncated", action="store_true",
                      help="show the complete calls of a recording whose last line was cut short")
    view.set_defaults(run=view_command)


def _program_options(name: str) -> CommandParser:
    """A parser of the options a program-running command takes, apart: they may also be
    written between REC and `--` (`cafe record REC --record-mode all -- CMD`), where the
    program's argument list would otherwise take them."""
    return CommandParser(prog=f"{ROOT_PROG} {name}", add_help=False)


def _add_record(commands: Commands) -> None:
    options = _program_options("record")
    options.add_argument("--record-mode", choices=["once", "all"], default="once",
                         help="once: never overwrite a recording (default); all: re-record")
    record = commands.add_parser(
        "record", parents=[options],
        help="run a Python program, recording its model calls (httpx2, the openai SDK's) to a file")
    record.add_argument("recording", metavar="REC", type=recording_to_write,
                        help="where to write the recording (JSONL, private: 0600)")
    record.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ...",
                        help="the program to run, after --, e.g. -- python agent.py")
    record.set_defaults(run=record_command, subcommand="record", options=options)


def _add_replay_run(commands: Commands) -> None:
    options = _program_options("replay-run")
    options.add_argument("--ignore", action="append", default=[], metavar="FIELD.PATH",
                         help="a request field to ignore when matching, e.g. metadata.run_id")
    options.add_argument("--allow-truncated", action="store_true",
                         help="replay the complete calls of a recording whose last line was cut short")
    replay_run = commands.add_parser(
        "replay-run", parents=[options],
        help="run a Python program, answering its model calls from a recording (no network)")
    replay_run.add_argument("recording", metavar="REC", type=file_to_read, help="the recording to answer from")
    replay_run.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ...",
                            help="the program to run, after --, e.g. -- python agent.py")
    replay_run.set_defaults(run=replay_run_command, subcommand="replay-run", options=options)
