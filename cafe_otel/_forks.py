"""A hook for forked children, registered by its first user rather than on import."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable


class ChildHook:
    """Calls `in_child` in every child forked after the first `watch()`: a module that holds
    one registers nothing with `os.register_at_fork` until something it starts needs it."""

    def __init__(self, in_child: Callable[[], None]) -> None:
        self._in_child = in_child
        self._lock = threading.Lock()
        self._registered = False

    def watch(self) -> None:
        with self._lock:
            if not self._registered and hasattr(os, "register_at_fork"):
                os.register_at_fork(after_in_child=self._in_child)
                self._registered = True
