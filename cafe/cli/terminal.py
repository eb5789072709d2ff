"""What `cafe` writes on a terminal: every command's output (plugins' too) goes through an
`EscapingStream`, and an error is one line."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import sys
from typing import Any, TextIO

from cafe.privacy import structure_scrubber

# Set (to anything) to see an internal error's traceback instead of its one line.
DEBUG_VARIABLE = "CAFE_DEBUG"

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


class EscapingStream:
    """A text stream whose writes are `printable`: every command's output (plugins' too)
    reaches the terminal through one, whatever recording, file name or reply it quotes.

    A reader that closes the pipe (`cafe shift | head -1`) ends the output, not the
    command: the rest is dropped and the command finishes its work (a recording is
    completed, telemetry shut down) and exits with its own code, as `head`'s writer would
    want. The process's own stream is then pointed at /dev/null, as the Python docs advise,
    so that the interpreter's last flush finds no broken pipe to complain about. A stream
    closed before the command started (`cafe shift >&-`: Python's `sys.stdout` is None) has
    no reader either. A write that fails otherwise (a full disk, an I/O error) drops the rest
    the same way and is kept in `failure` (its errno's name), for the command to report."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream: TextIO = io.StringIO() if stream is None else stream
        self.reader_gone = stream is None
        self.failure: str | None = None

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                self._stream.write(printable(text))
            except OSError as error:
                self._drop_the_rest(error)
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._stream.flush()
            except OSError as error:
                self._drop_the_rest(error)

    def _drop_the_rest(self, error: OSError) -> None:
        self.reader_gone = True
        if not isinstance(error, BrokenPipeError):
            self.failure = errno.errorcode.get(error.errno or 0, type(error).__name__)
        if self._stream is not sys.stdout and self._stream is not sys.stderr:
            return  # a stream handed in: its descriptor is not ours to move
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def one_line(error: BaseException, text: str | None = None) -> str:
    """The error and its notes (where a failed recording left its calls) on one line, with
    the secret patterns applied: a file name it quotes may hold a key (`deploy_sk-...`), and
    the line goes to CI logs as the mismatch page's error line goes to a reader."""
    parts = [str(error) if text is None else text, *getattr(error, "__notes__", ())]
    return structure_scrubber().scrub("; ".join(part.replace("\n", " ") for part in parts if part))
