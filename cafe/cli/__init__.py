"""The `cafe` command (`cafe`, `python -m cafe`): `main()` parses the arguments and runs the
one command they name.

    _main.py        main(): the dispatch, exit codes for errors, interrupts and SIGTERM
    commands.py     the parser: every command's arguments and the function it runs
    arguments.py    argument types (paths, attached values) and the script and decisions
    shift.py        shift, replay          recordings.py   check-recording, view
    wire.py         record, replay-run     plugins.py      the `cafe.plugins` seam
    terminal.py     what reaches the terminal: escaped, one line per error
    termination.py  SIGTERM ends a command as Ctrl-C does

The dispatch sits in `_main.py`, not `main.py`: `cafe.cli.main` is the function (the console
script's `cafe.cli:main`), and a submodule of that name would make it mean two things.
"""

from cafe.cli._main import main

__all__ = ["main"]
