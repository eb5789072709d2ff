"""What httpx and httpx2 share, written once: the two have one API (a client picks its transport
per request in `_transport_for_url`; a transport's `handle_request` gives a response whose
`stream` is a byte stream), so their modules differ only in whose classes they subclass, and
everything here reads their objects by that API alone."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

from cafe.wire._libraries import Chains
from cafe.wire._transport import (
    ObservedCall,
    closer,
    observe_whole,
    observed_async_chunks,
    observed_chunks,
    start_call,
    wire_headers,
)
from cafe.wire._types import WireObserver, WireRequest, WireResponse, WireSource

_T = TypeVar("_T")


def wire_request(request: Any, started_ns: int) -> WireRequest:
    """The `WireRequest` of a request whose body has been read."""
    url = request.url
    return WireRequest(method=request.method, scheme=url.scheme, host=url.host, port=url.port,
                       target=url.raw_path.decode("ascii", "replace"), headers=wire_headers(request.headers.raw),
                       body=request.content, started_ns=started_ns)


def wire_response(response: Any, at_ns: int) -> WireResponse:
    return WireResponse(status=response.status_code, headers=wire_headers(response.headers.raw), at_ns=at_ns)


class ObservedStream:
    """A response body whose chunks reach the call's observers as the caller reads it; put
    before the library's `SyncByteStream` in a class's bases."""

    def __init__(self, inner: Any, call: ObservedCall) -> None:
        self._inner = inner
        self._call = call
        self._finalizer = closer(call, self)

    def __iter__(self) -> Iterator[bytes]:
        return observed_chunks(self._inner, self._call)

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._finalizer.detach()
            self._call.closed()


class AsyncObservedStream:
    """`ObservedStream` before the library's `AsyncByteStream`."""

    def __init__(self, inner: Any, call: ObservedCall) -> None:
        self._inner = inner
        self._call = call
        self._finalizer = closer(call, self)

    def __aiter__(self) -> AsyncIterator[bytes]:
        return observed_async_chunks(self._inner, self._call)

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._finalizer.detach()
            self._call.closed()


class ReplayedStream:
    """A source's chunks, one read each, byte for byte, then its `end_error` raised when it
    has one; before the library's `SyncByteStream` and `AsyncByteStream`."""

    def __init__(self, chunks: tuple[bytes, ...], end_error: BaseException | None) -> None:
        self._chunks = chunks
        self._end_error = end_error

    def __iter__(self) -> Iterator[bytes]:
        yield from self._chunks
        if self._end_error is not None:
            raise self._end_error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk
        if self._end_error is not None:
            raise self._end_error


def _already_read(response: Any) -> bytes | None:
    # A response built with `content=`/`json=` (MockTransport handlers, a source's whole
    # answer) is read in its constructor: its stream is never iterated again, so its body is
    # observed here, whole.
    content: bytes | None = getattr(response, "_content", None)
    return content


def observe(transport: Any, request: Any, stream_class: Callable[[Any, ObservedCall], Any],
            sync_stream: type[Any]) -> Any:
    """`transport.inner`'s response to `request`, the call heard by `transport.observers`."""
    clock = transport.clock
    started_ns = clock()
    request.read()
    call = start_call(transport.observers, wire_request(request, started_ns), clock)
    try:
        response = transport.inner.handle_request(request)
    except BaseException as error:
        call.failed(error)
        raise
    call.response(wire_response(response, clock()))
    body = _already_read(response)
    if body is not None:
        observe_whole(call, body)
        return response
    stream = response.stream
    if not isinstance(stream, sync_stream):  # pragma: no cover - an async-only transport
        raise TypeError("a sync client was handed an async response stream")
    response.stream = stream_class(stream, call)
    return response


async def observe_async(transport: Any, request: Any, stream_class: Callable[[Any, ObservedCall], Any],
                        async_stream: type[Any]) -> Any:
    clock = transport.clock
    started_ns = clock()
    await request.aread()
    call = start_call(transport.observers, wire_request(request, started_ns), clock)
    try:
        response = await transport.inner.handle_async_request(request)
    except BaseException as error:
        call.failed(error)
        raise
    call.response(wire_response(response, clock()))
    body = _already_read(response)
    if body is not None:
        observe_whole(call, body)
        return response
    stream = response.stream
    if not isinstance(stream, async_stream):  # pragma: no cover - a sync-only transport
        raise TypeError("an async client was handed a sync response stream")
    response.stream = stream_class(stream, call)
    return response


def is_source(transport: object) -> bool:
    """A transport that is itself a source (a client handed a replay) keeps answering: an
    installed source never replaces it."""
    return getattr(transport, "is_wire_source", False) is True


def chain(chains: Chains, transport: Any, observed_class: Callable[..., _T],
          source_transport: Callable[[WireSource], Any]) -> _T:
    """The observed chain over the transport a client picked: the installed layers'
    observers (after those of a cafe transport the client was handed), over the latest
    installed source when there is one (answering in the library's own objects), else over
    the client's transport."""
    inner, observed = transport, tuple[WireObserver, ...]()
    if isinstance(transport, observed_class):  # type: ignore[arg-type]
        # A client handed a cafe transport keeps its observers; the installed ones join them.
        inner, observed = transport.inner, transport.observers
    observers, source, clock = chains.parts(observed)
    if source is not None and not is_source(inner):
        inner = source_transport(source)
    return observed_class(inner, observers, clock=clock)


def patch_clients(chains: Chains, sync_client: Any, async_client: Any, sync_chain: Callable[[Any], Any],
                  async_chain: Callable[[Any], Any]) -> Callable[[], None]:
    """Wrap `_transport_for_url` of the library's two clients, so that the transport each
    picks for a request (its default, one it was handed, a mount, a proxy from the
    environment) is routed through the chain; returns what puts them back."""
    sync_original = sync_client._transport_for_url
    async_original = async_client._transport_for_url

    def sync_transport_for_url(client: Any, url: Any) -> Any:
        return chains.chain_of(client, sync_original(client, url), sync_chain)

    def async_transport_for_url(client: Any, url: Any) -> Any:
        return chains.chain_of(client, async_original(client, url), async_chain)

    sync_client._transport_for_url = sync_transport_for_url
    async_client._transport_for_url = async_transport_for_url

    def unpatch() -> None:
        sync_client._transport_for_url = sync_original
        async_client._transport_for_url = async_original

    return unpatch
