"""`CallBuilder`: the one thread that builds each observed call's span and metrics once the
call has ended, so that the calling thread pays only for handing it over, and that ends a
call still waiting for a retry when its wait is over."""

from __future__ import annotations

import atexit
import heapq
import itertools
import queue
import threading
import time
import weakref
from collections.abc import Callable
from typing import Protocol

from cafe_otel._forks import ChildHook

MAX_QUEUED_CALLS = 512  # calls waiting for the builder's thread; past this, built by their caller


class Buildable(Protocol):
    """What a `CallBuilder` builds: an ended call (`_Operation`)."""

    def build(self) -> None:
        """Makes what the call reports; never raises."""


class _Stop:
    """Tells the builder's thread to end (put by `CallBuilder.close`)."""


class _Wake:
    """Wakes the builder's thread to look at its deadlines again (put by `CallBuilder.later`)."""


_STOP = _Stop()
_WAKE = _Wake()
_BUILDERS: weakref.WeakSet[CallBuilder] = weakref.WeakSet()


class CallBuilder:
    """One daemon thread that builds the spans and metrics of the calls handed to it, in
    the order they ended, so that the calling thread pays only for handing each over.

    A handle of `configure()` makes one for its wire observers (`TelemetryHandle.wire_observer`),
    and drains it before anything reads what it builds: `force_flush`, `shutdown`, every
    metrics collection, and the process's exit (an exit hook that runs before the
    providers' own). Each call handed over is built exactly once: by the thread, or by
    whoever drains, or by the caller itself when `limit` calls are already waiting (never
    dropped), or after `close` (then on the provider as it is, shut down or not).

    `later(delay, action)` runs `action` on the thread once `delay` seconds have passed (a
    call whose retry has not come by then is ended); `drain(expire=True)` and `close` run
    every action still waiting at once."""

    def __init__(self, *, limit: int = MAX_QUEUED_CALLS, exit_timeout: float = 5.0) -> None:
        self._queue: queue.SimpleQueue[Buildable | threading.Event | _Stop | _Wake] = queue.SimpleQueue()
        self._limit = limit
        self._worker: threading.Thread | None = None
        self._starting = threading.Lock()
        self._closed = False
        self._timed: list[tuple[float, int, Callable[[], None]]] = []  # (due, order, action), a heap
        self._timed_lock = threading.Lock()
        self._order = itertools.count()
        _FORKS.watch()
        _BUILDERS.add(self)
        # Registered after the providers' own exit hooks, so it runs before them (atexit
        # runs the last registered first): what is still queued reaches their processors.
        atexit.register(_drain_at_exit, weakref.ref(self), exit_timeout)

    def submit(self, call: Buildable) -> None:
        """Hands `call` over to be built (never raises)."""
        if self._closed or self._queue.qsize() >= self._limit:
            call.build()  # closed, or the thread is behind: built here rather than dropped
            return
        if self._worker is None:
            self._start()
        self._queue.put(call)
        if self._closed:  # closed meanwhile: the thread may be gone, so nothing is left behind
            self._build_queued()

    def later(self, delay: float, action: Callable[[], None]) -> None:
        """Runs `action` (which never raises) on the thread after `delay` seconds, or at the
        next `drain(expire=True)` or `close`, whichever comes first; at once when closed."""
        if self._closed:
            action()
            return
        with self._timed_lock:
            heapq.heappush(self._timed, (time.monotonic() + max(delay, 0.0), next(self._order), action))
        if self._worker is None:
            self._start()
        self._queue.put(_WAKE)  # the thread's wait is shortened to the new deadline

    def _due(self, *, every: bool = False) -> float | None:
        """Runs the actions that are due (all of them with `every`); returns the seconds until
        the next one, or None when none waits."""
        while True:
            with self._timed_lock:
                if not self._timed:
                    return None
                due, _, action = self._timed[0]
                wait = due - time.monotonic()
                if wait > 0 and not every:
                    return wait
                heapq.heappop(self._timed)
            action()

    def _start(self) -> None:
        with self._starting:
            if self._worker is None:
                worker = threading.Thread(target=self._run, name="cafe-otel-call-builder", daemon=True)
                worker.start()
                self._worker = worker

    def _run(self) -> None:
        get = self._queue.get
        wait: float | None = None
        while True:
            try:
                item = get(timeout=wait) if wait is not None else get()
            except queue.Empty:
                wait = self._due()
                continue
            if self._timed:
                wait = self._due()
            if isinstance(item, _Wake):
                continue
            if isinstance(item, threading.Event):
                item.set()  # a drain waits for everything put before it
            elif isinstance(item, _Stop):
                self._build_queued()
                return
            else:
                item.build()

    def _build_queued(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, threading.Event):
                item.set()
            elif not isinstance(item, _Stop | _Wake):
                item.build()

    def drain(self, timeout: float = 5.0, *, expire: bool = False) -> bool:
        """Builds every call handed over before this one, waiting at most `timeout` seconds
        for the thread; what is still queued then is built here. With `expire`, every
        action waiting for its time runs now too (a call still waiting for a retry is ended).
        False when the thread was still building a call at the bound (that call ends on its
        own, once)."""
        if expire:
            self._due(every=True)
        worker = self._worker
        finished = True
        if not self._closed and worker is not None and worker is not threading.current_thread() and worker.is_alive():
            reached = threading.Event()
            self._queue.put(reached)
            finished = reached.wait(max(timeout, 0.0))
        self._build_queued()
        return finished

    def close(self, timeout: float = 5.0) -> bool:
        """Drains (every waiting action run now), then stops the thread: calls ending
        afterwards are built where they end."""
        drained = self.drain(timeout, expire=True)
        self._closed = True
        if self._worker is not None:
            self._queue.put(_STOP)
        return drained

    def _forget_thread(self) -> None:
        # In a forked child: the parent's thread is not there, and what the parent had
        # queued is the parent's to build (built twice, it would be exported twice).
        self._queue = queue.SimpleQueue()
        self._worker = None
        self._starting = threading.Lock()
        self._timed = []
        self._timed_lock = threading.Lock()


def _drain_at_exit(builder: weakref.ref[CallBuilder], timeout: float) -> None:
    found = builder()
    if found is not None:
        found.close(timeout)


def _forget_threads_in_child() -> None:
    for builder in list(_BUILDERS):
        builder._forget_thread()


_FORKS = ChildHook(_forget_threads_in_child)  # registered by the first builder, not on import
