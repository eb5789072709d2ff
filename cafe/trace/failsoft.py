"""The one fail-soft boundary: where a failure of something beside the shift (an exporter,
a trace listener) stops being an exception and becomes a report.

A report names the failure's class and where it happened, never the exception's message:
the message of a connection error or a listener's KeyError may quote customer text or a
secret-bearing URL, and a report is made to be logged. `cafe.trace.export_fail_soft`, the
tracer's listener isolation and `cafe_otel`'s exporter boundary all report through here.

One boundary, `attempt(fn)`, in two shapes: `fail_soft(call)` attempts a call on the
caller's thread (a listener, the lesson's `export()`), and `FailSoft.call(fn, ...)` bounds it
in time too: it attempts `fn` on a worker thread and waits at most its timeout, returning an
`Outcome` (the value, or a short, low-cardinality cause), never an exception. With
`exclusive=True` at most one call is in flight: while one is hung, the next returns `busy` at
once instead of starting a second thread (a dead collector must not pile up threads).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class FailureReport:
    error_class: str  # e.g. "ConnectionRefusedError": low cardinality, no customer text
    where: str = ""

    def __str__(self) -> str:
        return f"{self.where} failed ({self.error_class})" if self.where else self.error_class


def report_failure(error: BaseException, where: str = "") -> FailureReport:
    return FailureReport(type(error).__name__, where)


def fail_soft(call: Callable[[], object], where: str = "") -> FailureReport | None:
    """Run `call`; None when it returned, a report when it raised an `Exception`.
    (KeyboardInterrupt and SystemExit still propagate: they are the user's, not a fault.)"""
    outcome = attempt(call)
    return None if outcome.error_type is None else FailureReport(outcome.error_type, where)


# error.type values (low cardinality, as the SDK's self-observability metrics want them);
# an exception is named by its class, as the SDK's exporters do.
TIMEOUT = "timeout"
BUSY = "busy"
ALREADY_SHUTDOWN = "already_shutdown"


@dataclass(frozen=True)
class Outcome:
    """What a bounded call did: returned `value` (error_type None) or failed for `error_type`."""

    value: Any = None
    error_type: str | None = None
    why: str = ""  # a short text of our own: never the exception's message (it may echo content)

    @property
    def ok(self) -> bool:
        return self.error_type is None


def attempt(fn: Callable[..., Any], *args: Any) -> Outcome:
    """`fn(*args)` on this thread: its value, or the `Exception` it raised named by class."""
    try:
        return Outcome(value=fn(*args))
    except Exception as error:  # the boundary: every failure is reported, not raised
        return _failed(error)


def _failed(error: BaseException) -> Outcome:
    return Outcome(error_type=report_failure(error).error_class, why=f"raised {type(error).__name__}")


class FailSoft:
    """Calls bounded in time: each runs on a worker thread of its own and is waited for at
    most `timeout` seconds (see the module's text)."""

    def __init__(self, timeout: float, *, exclusive: bool = True, name: str = "cafe-otel-call") -> None:
        if not 0 < timeout <= threading.TIMEOUT_MAX:
            raise ValueError("timeout must be a positive, finite number of seconds")
        self.timeout = timeout
        self._exclusive = exclusive
        self._name = name
        self._lock = threading.Lock()
        self._running: threading.Event | None = None  # set when the call in flight has ended

    def busy(self) -> bool:
        with self._lock:
            return self._running is not None and not self._running.is_set()

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float | None = None) -> Outcome:
        """`fn(*args)` within `timeout` seconds (default: the boundary's); never raises."""
        bound = self.timeout if timeout is None else timeout
        if not bound >= 0:  # negative or NaN: do not wait at all
            bound = 0.0
        bound = min(bound, threading.TIMEOUT_MAX)
        ended = threading.Event()
        with self._lock:
            if self._exclusive and self._running is not None and not self._running.is_set():
                return Outcome(error_type=BUSY, why="the previous call is still hung; not attempted")
            self._running = ended
        box: list[Outcome] = []

        def run() -> None:
            try:
                box.append(attempt(fn, *args))
            except BaseException as error:  # on a worker thread even SystemExit is the callee's
                box.append(_failed(error))
            finally:
                ended.set()

        try:
            threading.Thread(target=run, name=self._name, daemon=True).start()
        except RuntimeError as error:  # no thread can be started (interpreter exiting)
            ended.set()
            return Outcome(error_type=report_failure(error).error_class, why="could not be called (no thread)")
        ended.wait(bound)
        if not box:
            return Outcome(error_type=TIMEOUT, why=f"no answer within {bound:g}s")
        return box[0]
