"""`ObservedTransport`: one httpx2 transport wrapped so that observers hear each call."""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence

import httpx2

from cafe.wire._types import CallObserver, CallOutcome, WireObserver, WireRequest, WireResponse

Clock = Callable[[], int]
"""A monotonic clock in nanoseconds (`time.monotonic_ns` unless one is injected)."""


def _headers(pairs: Iterable[tuple[bytes, bytes]]) -> tuple[tuple[str, str], ...]:
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


def wire_request(request: httpx2.Request, started_ns: int) -> WireRequest:
    """The `WireRequest` of an httpx2 request whose body has been read."""
    url = request.url
    target = url.raw_path.decode("ascii", "replace")
    return WireRequest(method=request.method, scheme=url.scheme, host=url.host, port=url.port,
                       target=target, headers=_headers(request.headers.raw), body=request.content,
                       started_ns=started_ns)


def wire_response(response: httpx2.Response, at_ns: int) -> WireResponse:
    return WireResponse(status=response.status_code, headers=_headers(response.headers.raw), at_ns=at_ns)


_DONE_EVENTS = (b"data: [DONE]\n\n", b"data: [DONE]\r\n\r\n", b"data: [DONE]\r\r")
_TAIL = max(len(done) for done in _DONE_EVENTS)


class _Call:
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


def _start(observers: Sequence[WireObserver], request: WireRequest, clock: Clock) -> _Call:
    started: list[CallObserver] = []
    call = _Call(started, clock)
    try:
        for observer in observers:
            heard = observer.start(request)
            if heard is not None:
                started.append(heard)
    except BaseException as error:
        call.failed(error)
        raise
    return call


class _ObservedStream(httpx2.SyncByteStream):
    """A response body whose chunks reach the call's observers as the caller reads them."""

    def __init__(self, inner: httpx2.SyncByteStream, call: _Call) -> None:
        self._inner = inner
        self._call = call
        # The finalizer holds the call, never this stream, so that dropping the response is
        # what ends the call (closed early) when nobody closed it.
        self._finalizer = weakref.finalize(self, call.abandoned)

    def __iter__(self) -> Iterator[bytes]:
        call = self._call
        try:
            for data in self._inner:
                call.chunk(data)
                yield data
        except Exception as error:
            call.failed(error)
            raise
        call.completed()

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._finalizer.detach()
            self._call.closed()


class _AsyncObservedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, call: _Call) -> None:
        self._inner = inner
        self._call = call
        self._finalizer = weakref.finalize(self, call.abandoned)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        call = self._call
        try:
            async for data in self._inner:
                call.chunk(data)
                yield data
        except BaseException as error:
            if not isinstance(error, GeneratorExit):
                call.failed(error)
            raise
        call.completed()

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._finalizer.detach()
            self._call.closed()


def _already_read(response: httpx2.Response) -> bytes | None:
    # A response built with `content=`/`json=` (MockTransport handlers) is read in its
    # constructor: its stream is never iterated again, so its body is observed here, whole.
    content: bytes | None = getattr(response, "_content", None)
    return content


class ObservedTransport(httpx2.BaseTransport):
    """An httpx2 transport that sends through `inner` and tells `observers` about each call.

    `inner` is any transport: `httpx2.HTTPTransport` (the network), `httpx2.MockTransport`,
    or a source of recorded answers (`cafe.wire.ReplayTransport`). Each observer's `start`
    is told of the request before it is sent; the response body is wrapped so that its
    chunks reach the observers as the caller reads them, and `end` fires exactly once: when
    the body is read to its end, when the response is closed, when it is garbage-collected
    unclosed (closed early), or when the transport raises (failed, with the failure's kind).
    `clock` is a monotonic clock in nanoseconds."""

    def __init__(self, inner: httpx2.BaseTransport, observers: Sequence[WireObserver] = (),
                 *, clock: Clock = time.monotonic_ns) -> None:
        self.inner = inner
        self.observers: tuple[WireObserver, ...] = tuple(observers)
        self.clock = clock

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if not self.observers:
            return self.inner.handle_request(request)
        clock = self.clock
        started_ns = clock()
        request.read()
        call = _start(self.observers, wire_request(request, started_ns), clock)
        try:
            response = self.inner.handle_request(request)
        except BaseException as error:
            call.failed(error)
            raise
        call.response(wire_response(response, clock()))
        body = _already_read(response)
        if body is not None:
            if body:
                call.chunk(body)
            call.completed()
            return response
        stream = response.stream
        if not isinstance(stream, httpx2.SyncByteStream):  # pragma: no cover - an async-only transport
            raise TypeError("a sync client was handed an async response stream")
        response.stream = _ObservedStream(stream, call)
        return response

    def close(self) -> None:
        self.inner.close()

    def __repr__(self) -> str:
        return f"ObservedTransport({type(self.inner).__name__}, {len(self.observers)} observer(s))"


class AsyncObservedTransport(httpx2.AsyncBaseTransport):
    """`ObservedTransport` for `httpx2.AsyncClient`: the same observers, the same promises.
    Concurrent calls (`asyncio.gather`) each get their own `CallObserver`."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, observers: Sequence[WireObserver] = (),
                 *, clock: Clock = time.monotonic_ns) -> None:
        self.inner = inner
        self.observers: tuple[WireObserver, ...] = tuple(observers)
        self.clock = clock

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if not self.observers:
            return await self.inner.handle_async_request(request)
        clock = self.clock
        started_ns = clock()
        await request.aread()
        call = _start(self.observers, wire_request(request, started_ns), clock)
        try:
            response = await self.inner.handle_async_request(request)
        except BaseException as error:
            call.failed(error)
            raise
        call.response(wire_response(response, clock()))
        body = _already_read(response)
        if body is not None:
            if body:
                call.chunk(body)
            call.completed()
            return response
        stream = response.stream
        if not isinstance(stream, httpx2.AsyncByteStream):  # pragma: no cover - a sync-only transport
            raise TypeError("an async client was handed a sync response stream")
        response.stream = _AsyncObservedStream(stream, call)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __repr__(self) -> str:
        return f"AsyncObservedTransport({type(self.inner).__name__}, {len(self.observers)} observer(s))"
