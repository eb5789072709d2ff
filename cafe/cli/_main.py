"""`main()`: the `cafe` command's one dispatch, and how it ends.

Errors are one line on stderr and a distinct exit code (see `CafeError.exit_code`),
never a traceback. Set CAFE_DEBUG=1 to see the traceback of an unexpected failure.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from typing import TextIO, cast

from cafe.cli.arguments import attach_values
from cafe.cli.commands import VersionAsked, build_parser
from cafe.cli.plugins import PluginLoader, installed_plugins
from cafe.cli.terminal import DEBUG_VARIABLE, EscapingStream, one_line
from cafe.cli.termination import EXIT_TERMINATED, Terminated, terminated_as_interrupt
from cafe.errors import CafeError, Unwritable
from cafe.trace.ids import new_conversation_id

EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130  # what a shell reports for a process ended by Ctrl-C
DISTRIBUTION = "cafe_otel"  # the distribution cafe ships in (pyproject's name, normalised)


def version() -> str:
    """The installed distribution's version, or `unknown` when cafe runs from a source tree
    that was never installed."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"


def main(
    argv: Sequence[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    load_plugins: PluginLoader = installed_plugins,
    new_conversation_id: Callable[[], str] = new_conversation_id,
) -> int:
    """Run the `cafe` command `argv` (default: the process's arguments) and return its exit
    code. `new_conversation_id` gives each shift its `gen_ai.conversation.id`."""
    if argv is None:
        # The process's own command: its heap goes back to the OS at exit. Python's last
        # collection would walk every object a long shift made (seconds, after SIGTERM too);
        # frozen, it walks none. Everything main() opens it also closes.
        atexit.register(gc.freeze)
    environ = os.environ if environ is None else environ
    streams = EscapingStream(out or sys.stdout), EscapingStream(err or sys.stderr)
    try:
        code = _main(argv, environ, *streams, load_plugins, new_conversation_id)
    finally:
        for stream in streams:  # a closed pipe is found here at the latest, not at exit
            stream.flush()
    escaping_out, escaping_err = streams
    if escaping_out.failure is not None and code == 0:
        # Output that never reached its file is a failed write, not a success.
        escaping_err.write(f"cafe: error: {Unwritable('<stdout>', escaping_out.failure, what='the output')}\n")
        escaping_err.flush()
        return Unwritable.exit_code
    return code


def _main(argv: Sequence[str] | None, environ: Mapping[str, str], escaping_out: EscapingStream,
          escaping_err: EscapingStream, load_plugins: PluginLoader, new_conversation_id: Callable[[], str]) -> int:
    out, err = cast(TextIO, escaping_out), cast(TextIO, escaping_err)
    try:
        def warn(line: str) -> None:
            err.write(line + "\n")

        with terminated_as_interrupt():
            plugins = load_plugins(warn)
            parser = build_parser(plugins, new_conversation_id)
            args = parser.parse_args(attach_values(parser, sys.argv[1:] if argv is None else argv))
            code: int = args.run(args, environ, out, err)
            return code
    except VersionAsked:
        out.write(f"cafe {version()}\n")
        return 0
    except CafeError as error:
        err.write(f"cafe: error: {one_line(error)}\n")
        return error.exit_code
    except KeyboardInterrupt as error:
        if isinstance(error, Terminated):
            err.write(f"cafe: {one_line(error, 'terminated (SIGTERM)')}\n")
            return EXIT_TERMINATED
        err.write(f"cafe: {one_line(error, 'interrupted')}\n")
        return EXIT_INTERRUPTED
    except Exception as error:
        if environ.get(DEBUG_VARIABLE):
            raise
        err.write(
            f"cafe: internal error ({type(error).__name__}); set {DEBUG_VARIABLE}=1 for the traceback\n"
        )
        return EXIT_INTERNAL
