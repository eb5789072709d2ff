"""The `cafe` parser: every command, its arguments and the function that runs it.

Each command sets `run(args, environ, out, err) -> exit code` with `set_defaults`, a
plugin's commands included, and `main` calls it and nothing else. Plugins register after the
product's commands, in their `order`: the café example adds `shift` and `replay`, then
`cafe_otel` adds its options to every command that runs an agent.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeAlias, cast

from cafe.cli.arguments import file_to_read, page_to_write, recording_to_write
from cafe.cli.plugins import CliPlugin, CommandContext
from cafe.cli.recordings import check_recording_command, view_command
from cafe.cli.wire import record_command, replay_run_command
from cafe.errors import UsageError
from cafe.trace.ids import new_conversation_id

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
DESCRIPTION = ("The `cafe` command: record and replay any agent's model calls, draw a recording, check it "
               "for secrets, and whatever plugins add.")


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
    _add_check_recording(commands)
    _add_view(commands)
    _add_record(commands)
    _add_replay_run(commands)
    context = CommandContext(plugins, new_id)
    for plugin in sorted(plugins, key=lambda plugin: (plugin.order, plugin.name)):
        plugin.register(commands, context)
    return parser


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
        help="run a Python program, recording its model calls (httpx or httpx2: any openai SDK's) to a file")
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
