"""The seam on `httpx2` (openai 3.x, anthropic 2.x, google-genai, mistralai): its transports
observed, its clients patched, a source answering in its objects. What it shares with httpx is
written once, in `_family`; `cafe.wire.httpx2` is its public face (and `cafe.wire`'s transport
names are its)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx2

from cafe.privacy import Scrubber
from cafe.recording.modes import RecordMode
from cafe.wire._libraries import Chains, _family
from cafe.wire._recorder import WireRecorder
from cafe.wire._replay import WireReplay
from cafe.wire._transport import Clock
from cafe.wire._types import RecordedFailure, WireAnswer, WireObserver, WireSource

_FAILURES: dict[str, type[httpx2.TransportError]] = {
    "timeout": httpx2.ReadTimeout, "connect_error": httpx2.ConnectError, "read_error": httpx2.ReadError,
    "write_error": httpx2.WriteError, "protocol_error": httpx2.RemoteProtocolError,
}


class _ObservedStream(_family.ObservedStream, httpx2.SyncByteStream):
    pass


class _AsyncObservedStream(_family.AsyncObservedStream, httpx2.AsyncByteStream):
    pass


class _ReplayedStream(_family.ReplayedStream, httpx2.SyncByteStream, httpx2.AsyncByteStream):
    pass


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
        response: httpx2.Response = _family.observe(self, request, _ObservedStream, httpx2.SyncByteStream)
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
        response: httpx2.Response = await _family.observe_async(self, request, _AsyncObservedStream,
                                                                httpx2.AsyncByteStream)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __repr__(self) -> str:
        return f"AsyncObservedTransport({type(self.inner).__name__}, {len(self.observers)} observer(s))"


def _response(answer: WireAnswer) -> httpx2.Response:
    headers = list(answer.headers)
    if answer.chunks is not None:
        return httpx2.Response(answer.status, headers=headers, stream=_ReplayedStream(answer.chunks, answer.end_error))
    return httpx2.Response(answer.status, headers=headers, content=answer.content)


def _answered(source: WireSource, request: httpx2.Request) -> httpx2.Response:
    """`source`'s answer to a request whose body has been read, as an httpx2 response."""
    try:
        answer = source.answer(_family.wire_request(request, 0))
    except RecordedFailure as failed:
        raise _FAILURES.get(failed.failure, httpx2.TransportError)(str(failed)) from None
    return _response(answer)


class SourceTransport(httpx2.BaseTransport, httpx2.AsyncBaseTransport):
    """A source (`cafe.wire.WireSource`) as an httpx2 transport, sync and async: what an
    installed replay answers an httpx2 client through."""

    is_wire_source = True

    def __init__(self, source: WireSource) -> None:
        self.source = source

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        request.read()
        return _answered(self.source, request)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        await request.aread()
        return _answered(self.source, request)  # no await from here on: tasks are matched one at a time

    def __repr__(self) -> str:
        return f"SourceTransport({self.source!r})"


class ReplayTransport(WireReplay, httpx2.BaseTransport, httpx2.AsyncBaseTransport):
    """A `cafe.wire.WireReplay` that is an httpx2 transport, sync and async, for
    `openai.OpenAI(http_client=httpx2.Client(transport=ReplayTransport(path)))`: the same
    strict, ordered matching, no request reaching the network."""

    is_wire_source = True

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        request.read()
        return _answered(self, request)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        await request.aread()
        return _answered(self, request)

    def close(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


class RecordingTransport(ObservedTransport):
    """A transport for `openai.OpenAI(http_client=httpx2.Client(transport=...))` that sends
    through `inner` (the network by default) and records each call to `path`; closing the
    client moves the recording into place."""

    def __init__(self, path: Path | str, inner: httpx2.BaseTransport | None = None, *,
                 mode: RecordMode | str = RecordMode.ONCE, scrubber: Scrubber | None = None,
                 observers: Sequence[WireObserver] = (), clock: Clock = time.monotonic_ns) -> None:
        self.recorder = WireRecorder(path, mode=mode, scrubber=scrubber, clock=clock)
        super().__init__(inner if inner is not None else httpx2.HTTPTransport(), [self.recorder, *observers],
                         clock=clock)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.recorder.close()


class AsyncRecordingTransport(AsyncObservedTransport):
    """`RecordingTransport` for `openai.AsyncOpenAI(http_client=httpx2.AsyncClient(...))`."""

    def __init__(self, path: Path | str, inner: httpx2.AsyncBaseTransport | None = None, *,
                 mode: RecordMode | str = RecordMode.ONCE, scrubber: Scrubber | None = None,
                 observers: Sequence[WireObserver] = (), clock: Clock = time.monotonic_ns) -> None:
        self.recorder = WireRecorder(path, mode=mode, scrubber=scrubber, clock=clock)
        super().__init__(inner if inner is not None else httpx2.AsyncHTTPTransport(),
                         [self.recorder, *observers], clock=clock)

    async def aclose(self) -> None:
        try:
            await super().aclose()
        finally:
            self.recorder.close()


def _source_transport(source: WireSource) -> Any:
    return source if isinstance(source, httpx2.BaseTransport) else SourceTransport(source)


class _Httpx2:
    name = "httpx2"

    def patch(self, chains: Chains) -> Callable[[], None]:
        def sync_chain(transport: httpx2.BaseTransport) -> ObservedTransport:
            return _family.chain(chains, transport, ObservedTransport, _source_transport)

        def async_chain(transport: httpx2.AsyncBaseTransport) -> AsyncObservedTransport:
            return _family.chain(chains, transport, AsyncObservedTransport, _source_transport)

        return _family.patch_clients(chains, httpx2.Client, httpx2.AsyncClient, sync_chain, async_chain)

    def observed_client(self, client: httpx2.Client, observers: Sequence[WireObserver], clock: Clock) -> None:
        """Observe every transport `client` may pick (its own, each mount: a proxy from the
        environment), so that a proxied call is heard like a direct one."""
        client._transport = ObservedTransport(client._transport, observers, clock=clock)
        client._mounts = {pattern: None if mounted is None else ObservedTransport(mounted, observers, clock=clock)
                          for pattern, mounted in client._mounts.items()}

    def answering_client(self, answering: Any, observers: Sequence[WireObserver], clock: Clock,
                         timeout: Any) -> httpx2.Client:
        """A client over `answering` (a source, or a transport such as a `MockTransport`)
        only, observed, that never takes a proxy from the environment."""
        inner = answering if isinstance(answering, httpx2.BaseTransport) else SourceTransport(answering)
        return httpx2.Client(transport=ObservedTransport(inner, observers, clock=clock), trust_env=False,
                             follow_redirects=True, timeout=timeout)


LIBRARY = _Httpx2()
