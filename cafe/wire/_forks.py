"""Which process a recorder or a replay belongs to, counted in forks.

A forked child inherits the recorder's open file and counter and the replay's position: were
it to use them, its lines would carry the parent's call numbers and its answers would be taken
from the parent's. `process()` is read when such an object is made and compared on each call,
at the cost of one global read (a `getpid` is a system call): it changes in every child forked
after the first reading, and the hook that counts is registered then, not on import.
"""

from __future__ import annotations

import os
import threading

forks = 0  # forks since the first `process()` on this process's line; read by the guards
_registered = False
_lock = threading.Lock()


def _forked() -> None:
    global forks
    forks += 1


def process() -> int:
    """This process's number: another one in each child forked from here on."""
    global _registered
    if not _registered:
        with _lock:
            if not _registered:
                if hasattr(os, "register_at_fork"):
                    os.register_at_fork(after_in_child=_forked)
                _registered = True
    return forks
