"""SIGTERM, while a `cafe` command runs, ends it as Ctrl-C does.

A CI job's timeout, `timeout`, `docker stop` and systemd all stop a process with SIGTERM, whose
default ends Python at once, skipping every cleanup. Raised as an interrupt, it goes the way a
failure goes: a recording in progress keeps its calls in `PATH.partial` (and leaves none when
it holds no call, so nothing blocks the next recording of that path), the error line with its
note of the kept calls is printed, and telemetry is flushed. A second SIGTERM ends the process
outright.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

EXIT_TERMINATED = 128 + signal.SIGTERM  # 143, what a shell reports for a process ended by it


class Terminated(KeyboardInterrupt):
    """The process was asked to stop (SIGTERM)."""


def _raise(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second one is not held up by the cleanup
    raise Terminated()


@contextmanager
def terminated_as_interrupt() -> Iterator[None]:
    """SIGTERM raises `Terminated` inside the block, unless something else (an embedding
    program, a test runner) already handles SIGTERM, or this is not the main thread."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
