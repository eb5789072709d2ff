"""The observing of one call, library-neutral: its observers started, told of the response
head and of each chunk as the caller reads it, and `end` reached exactly once however the call
ends. Each client library's module (`cafe.wire._libraries`) wraps its own transports and
streams around these."""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Sequence
from typing import Any

from cafe.wire._types import CallObserver, CallOutcome, WireObserver, WireRequest, WireResponse

Clock = Callable[[], int]
"""A monotonic clock in nanoseconds (`time.monotonic_ns` unless one is injected)."""


def wire_headers(pairs: Iterable[tuple[bytes, bytes]]) -> tuple[tuple[str, str], ...]:
    """Raw header pairs as a `WireRequest` holds them: names lowercased, both decoded."""
    pairs = list(pairs)
    if not pairs:
        return ()
    # All names, and all values, decoded in one go each (this runs twice a call): joined by
    # a line end, which no header holds (HTTP forbids it; if one did, the count tells).
    raw_names, raw_values = zip(*pairs, strict=True)
    names = b"\n".join(raw_names).decode("latin-1").lower().split("\n")
    values = b"\n".join(raw_values).decode("latin-1").split("\n")
    if len(names) == len(values) == len(pairs):
        return tuple(zip(names, values, strict=True))
    return tuple((name.decode("latin-1").lower(), value.decode("latin-1")) for name, value in pairs)


_DONE_EVENTS = (b"data: [DONE]\n\n", b"data: [DONE]\r\n\r\n", b"data: [DONE]\r\r")
_TAIL = max(len(done) for done in _DONE_EVENTS)


class ObservedCall:
    """The observers of one call, and the promise that `end` reaches each of them once."""

    __slots__ = ("__weakref__", "_clock", "_ended", "_lock", "_tail", "observers")

    def __init__(self, observers: list[CallObserver], clock: Clock) -> None:
        self.observers = observers
        self._clock = clock
        self._ended = False
        self._lock = threading.Lock()
        self._tail = b""

    def response(self, response: WireResponse) -> None:
        for observer in self.observers:
            observer.response(response)

    def chunk(self, data: bytes) -> None:
        at_ns = self._clock()
        # Only the end of what was read is kept (to tell a finished stream from one left early).
        self._tail = data[-_TAIL:] if len(data) >= _TAIL else (self._tail + data)[-_TAIL:]
        for observer in self.observers:
            observer.chunk(data, at_ns)

    def end(self, outcome: CallOutcome) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended = True
        first_error: BaseException | None = None
        for observer in self.observers:
            try:
                observer.end(outcome)
            except BaseException as error:  # every observer hears the end; the first error is raised
                first_error = first_error or error
        if first_error is not None:
            raise first_error

    @property
    def ended(self) -> bool:
        return self._ended

    def completed(self) -> None:
        self.end(CallOutcome.completed(self._clock()))

    def closed_early(self) -> None:
        self.end(CallOutcome.closed_early(self._clock()))

    def closed(self) -> None:
        """The caller closed the response: completed when what it read ends with the event
        that ends an OpenAI-style stream (`data: [DONE]`: the SDK stops there and closes,
        without waiting for the connection's end of body), closed early otherwise."""
        if self._tail.endswith(_DONE_EVENTS):
            self.completed()
        else:
            self.closed_early()

    def abandoned(self) -> None:
        """Run by the garbage collector's finalizer: it must never raise."""
        with contextlib.suppress(Exception):  # nobody is left to hear it
            self.closed_early()

    def failed(self, error: BaseException) -> None:
        self.end(CallOutcome.failed(self._clock(), error))


def start_call(observers: Sequence[WireObserver], request: WireRequest, clock: Clock) -> ObservedCall:
    """The call `request` begins, each observer's `start` told of it (one that raises fails the
    call: those started hear its end)."""
    started: list[CallObserver] = []
    call = ObservedCall(started, clock)
    try:
        for observer in observers:
            heard = observer.start(request)
            if heard is not None:
                started.append(heard)
    except BaseException as error:
        call.failed(error)
        raise
    return call


def observed_chunks(inner: Iterable[bytes], call: ObservedCall) -> Iterator[bytes]:
    """`inner`'s chunks, each told to the call's observers as the caller reads it: completed
    at the end, failed when reading raises."""
    try:
        for data in inner:
            call.chunk(data)
            yield data
    except Exception as error:
        call.failed(error)
        raise
    call.completed()


async def observed_async_chunks(inner: AsyncIterable[bytes], call: ObservedCall) -> AsyncIterator[bytes]:
    try:
        async for data in inner:
            call.chunk(data)
            yield data
    except BaseException as error:
        if not isinstance(error, GeneratorExit):
            call.failed(error)
        raise
    call.completed()


def observe_whole(call: ObservedCall, body: bytes) -> None:
    """A body the response already holds whole (read in its constructor): observed at once."""
    if body:
        call.chunk(body)
    call.completed()


def closer(call: ObservedCall, stream: Any) -> weakref.finalize[[], None]:
    """The finalizer that ends `call` (closed early) when `stream` is dropped unclosed. It
    holds the call, never the stream, so that dropping the response is what ends the call."""
    return weakref.finalize(stream, call.abandoned)
