"""The seam on `httpx` (openai 1.x and 2.x, groq, ollama, litellm's core): its transports
observed, its clients patched, a source answering in its objects. What it shares with httpx2
is written once, in `_family`; `cafe.wire.httpx` is its public face."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from cafe.privacy import Scrubber
from cafe.recording.modes import RecordMode
from cafe.wire._libraries import Chains, _family
from cafe.wire._recorder import WireRecorder
from cafe.wire._replay import WireReplay
from cafe.wire._transport import Clock
from cafe.wire._types import RecordedFailure, WireAnswer, WireObserver, WireSource

_FAILURES: dict[str, type[httpx.TransportError]] = {
    "timeout": httpx.ReadTimeout, "connect_error": httpx.ConnectError, "read_error": httpx.ReadError,
    "write_error": httpx.WriteError, "protocol_error": httpx.RemoteProtocolError,
}


class _ObservedStream(_family.ObservedStream, httpx.SyncByteStream):
    pass


class _AsyncObservedStream(_family.AsyncObservedStream, httpx.AsyncByteStream):
    pass


class _ReplayedStream(_family.ReplayedStream, httpx.SyncByteStream, httpx.AsyncByteStream):
    pass


class ObservedTransport(httpx.BaseTransport):
    """An httpx transport that sends through `inner` and tells `observers` about each call.

    `inner` is any transport: `httpx.HTTPTransport` (the network), `httpx.MockTransport`,
    or a source of recorded answers (`cafe.wire.ReplayTransport`). Each observer's `start`
    is told of the request before it is sent; the response body is wrapped so that its
    chunks reach the observers as the caller reads them, and `end` fires exactly once: when
    the body is read to its end, when the response is closed, when it is garbage-collected
    unclosed (closed early), or when the transport raises (failed, with the failure's kind).
    `clock` is a monotonic clock in nanoseconds."""

    def __init__(self, inner: httpx.BaseTransport, observers: Sequence[WireObserver] = (),
                 *, clock: Clock = time.monotonic_ns) -> None:
        self.inner = inner
        self.observers: tuple[WireObserver, ...] = tuple(observers)
        self.clock = clock

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if not self.observers:
            return self.inner.handle_request(request)
        response: httpx.Response = _family.observe(self, request, _ObservedStream, httpx.SyncByteStream)
        return response

    def close(self) -> None:
        self.inner.close()

    def __repr__(self) -> str:
        return f"ObservedTransport({type(self.inner).__name__}, {len(self.observers)} observer(s))"


class AsyncObservedTransport(httpx.AsyncBaseTransport):
    """`ObservedTransport` for `httpx.AsyncClient`: the same observers, the same promises.
    Concurrent calls (`asyncio.gather`) each get their own `CallObserver`."""

    def __init__(self, inner: httpx.AsyncBaseTransport, observers: Sequence[WireObserver] = (),
                 *, clock: Clock = time.monotonic_ns) -> None:
        self.inner = inner
        self.observers: tuple[WireObserver, ...] = tuple(observers)
        self.clock = clock

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if not self.observers:
            return await self.inner.handle_async_request(request)
        response: httpx.Response = await _family.observe_async(self, request, _AsyncObservedStream,
                                                                httpx.AsyncByteStream)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __repr__(self) -> str:
        return f"AsyncObservedTransport({type(self.inner).__name__}, {len(self.observers)} observer(s))"


def _response(answer: WireAnswer) -> httpx.Response:
    headers = list(answer.headers)
    if answer.chunks is not None:
        return httpx.Response(answer.status, headers=headers, stream=_ReplayedStream(answer.chunks, answer.end_error))
    return httpx.Response(answer.status, headers=headers, content=answer.content)


def _answered(source: WireSource, request: httpx.Request) -> httpx.Response:
    """`source`'s answer to a request whose body has been read, as an httpx response."""
    try:
        answer = source.answer(_family.wire_request(request, 0))
    except RecordedFailure as failed:
        raise _FAILURES.get(failed.failure, httpx.TransportError)(str(failed)) from None
    return _response(answer)


class SourceTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """A source (`cafe.wire.WireSource`) as an httpx transport, sync and async: what an
    installed replay answers an httpx client through."""

    is_wire_source = True

    def __init__(self, source: WireSource) -> None:
        self.source = source

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        return _answered(self.source, request)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        return _answered(self.source, request)  # no await from here on: tasks are matched one at a time

    def __repr__(self) -> str:
        return f"SourceTransport({self.source!r})"


class ReplayTransport(WireReplay, httpx.BaseTransport, httpx.AsyncBaseTransport):
    """A `cafe.wire.WireReplay` that is an httpx transport, sync and async, for
    `openai.OpenAI(http_client=httpx.Client(transport=ReplayTransport(path)))`: the same
    strict, ordered matching, no request reaching the network."""

    is_wire_source = True

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        return _answered(self, request)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        return _answered(self, request)

    def close(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


class RecordingTransport(ObservedTransport):
    """A transport for `openai.OpenAI(http_client=httpx.Client(transport=...))` that sends
    through `inner` (the network by default) and records each call to `path`; closing the
    client moves the recording into place."""

    def __init__(self, path: Path | str, inner: httpx.BaseTransport | None = None, *,
                 mode: RecordMode | str = RecordMode.ONCE, scrubber: Scrubber | None = None,
                 observers: Sequence[WireObserver] = (), clock: Clock = time.monotonic_ns) -> None:
        self.recorder = WireRecorder(path, mode=mode, scrubber=scrubber, clock=clock)
        super().__init__(inner if inner is not None else httpx.HTTPTransport(), [self.recorder, *observers],
                         clock=clock)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.recorder.close()


class AsyncRecordingTransport(AsyncObservedTransport):
    """`RecordingTransport` for `openai.AsyncOpenAI(http_client=httpx.AsyncClient(...))`."""

    def __init__(self, path: Path | str, inner: httpx.AsyncBaseTransport | None = None, *,
                 mode: RecordMode | str = RecordMode.ONCE, scrubber: Scrubber | None = None,
                 observers: Sequence[WireObserver] = (), clock: Clock = time.monotonic_ns) -> None:
        self.recorder = WireRecorder(path, mode=mode, scrubber=scrubber, clock=clock)
        super().__init__(inner if inner is not None else httpx.AsyncHTTPTransport(),
                         [self.recorder, *observers], clock=clock)

    async def aclose(self) -> None:
        try:
            await super().aclose()
        finally:
            self.recorder.close()


def _source_transport(source: WireSource) -> Any:
    return source if isinstance(source, httpx.BaseTransport) else SourceTransport(source)


class _Httpx:
    name = "httpx"

    def patch(self, chains: Chains) -> Callable[[], None]:
        def sync_chain(transport: httpx.BaseTransport) -> ObservedTransport:
            return _family.chain(chains, transport, ObservedTransport, _source_transport)

        def async_chain(transport: httpx.AsyncBaseTransport) -> AsyncObservedTransport:
            return _family.chain(chains, transport, AsyncObservedTransport, _source_transport)

        return _family.patch_clients(chains, httpx.Client, httpx.AsyncClient, sync_chain, async_chain)

    def observed_client(self, client: httpx.Client, observers: Sequence[WireObserver], clock: Clock) -> None:
        """Observe every transport `client` may pick (its own, each mount: a proxy from the
        environment), so that a proxied call is heard like a direct one."""
        client._transport = ObservedTransport(client._transport, observers, clock=clock)
        client._mounts = {pattern: None if mounted is None else ObservedTransport(mounted, observers, clock=clock)
                          for pattern, mounted in client._mounts.items()}

    def answering_client(self, answering: Any, observers: Sequence[WireObserver], clock: Clock,
                         timeout: Any) -> httpx.Client:
        """A client over `answering` (a source, or a transport such as a `MockTransport`)
        only, observed, that never takes a proxy from the environment."""
        inner = answering if isinstance(answering, httpx.BaseTransport) else SourceTransport(answering)
        return httpx.Client(transport=ObservedTransport(inner, observers, clock=clock), trust_env=False,
                             follow_redirects=True, timeout=timeout)


LIBRARY = _Httpx()
