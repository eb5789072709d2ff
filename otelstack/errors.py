"""The named errors of `python -m otelstack up|down`: one line each, with its own exit code
in the harness's tree (cafe/errors.py), after the recording codes (30-50)."""

from __future__ import annotations

from cafe.errors import CafeError


class StackError(CafeError):
    """Base of the errors `otelstack up` and `down` stop with."""

    exit_code = 60


class StackDirectoryUnusable(StackError):
    """The stack directory, or a file otelstack keeps in it, is a symbolic link, not a
    directory or regular file, another user's, or (a directory) one others may write into:
    otelstack neither follows, uses nor changes it."""

    exit_code = 60


class StackStateMalformed(StackError):
    """stack.json is not what `up` writes; nothing is signalled on its word."""

    exit_code = 61


class PortInUse(StackError):
    """A port the stack binds was taken before `up` started anything."""

    exit_code = 62


class ProgramNotBuilt(StackError):
    exit_code = 63


class AlreadyUp(StackError):
    exit_code = 64


class ProgramFailed(StackError):
    """A program `up` started exited, or did not itself serve its ports in time."""

    exit_code = 65


class StillRunning(StackError):
    """A process `up` started outlived SIGKILL; stack.json is kept so `down` can try again."""

    exit_code = 66


class ProcUnavailable(StackError):
    """Without Linux's /proc, no pid can be proven to be the process `up` started."""

    exit_code = 67


def one_line(text: str) -> str:
    """`text` with line breaks and other control characters shown as escapes."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)
