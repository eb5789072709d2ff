"""Route every httpx2 client, however and whenever it was built, through the observed chain.

One process-wide registry holds the installed layers. While at least one is installed,
`httpx2.Client._transport_for_url` and `httpx2.AsyncClient._transport_for_url` are wrapped:
the transport a client picks for a request (its default `HTTPTransport`, a transport the
user handed it such as `MockTransport`, or a mounted one) is wrapped in an
`ObservedTransport` with the observers of every installed layer, and, when a layer holds a
source (a replay), the source answers instead of the client's transport, so the network is
never touched. Clients built before the block are covered too: the choice happens per
request. Recording, replay and telemetry each install a layer into the same registry, so
they stack instead of patching three times; the patch is put in place by the first layer
and taken out with the last.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

import httpx2

from cafe.wire._transport import AsyncObservedTransport, Clock, ObservedTransport
from cafe.wire._types import WireObserver

_T = TypeVar("_T")


@runtime_checkable
class WireSource(Protocol):
    """Answers requests in place of the network (a replay). It is both an
    `httpx2.BaseTransport` and an `httpx2.AsyncBaseTransport`."""

    def handle_request(self, request: httpx2.Request) -> httpx2.Response: ...

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response: ...


@dataclass(frozen=True, eq=False)
class WireLayer:
    """What one installer adds: observers to hear every call, and optionally a source that
    answers instead of the client's own transport (the latest installed source wins)."""

    observers: tuple[WireObserver, ...] = ()
    source: WireSource | None = None
    clock: Clock = field(default=time.monotonic_ns)


class _Registry:
    """The installed layers, and the patch on httpx2's clients while there is any."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._layers: tuple[WireLayer, ...] = ()
        self._originals: dict[type[Any], Any] = {}
        # Each client's last (transport picked, chain built over it), until the layers change:
        # a client picks the same transport for every request, and a chain holds no state.
        # Keyed by the client, weakly: the chain holds the transport, never the client.
        self._chains: weakref.WeakKeyDictionary[Any, tuple[Any, Any]] = weakref.WeakKeyDictionary()

    @property
    def layers(self) -> tuple[WireLayer, ...]:
        return self._layers

    def install(self, layer: WireLayer) -> None:
        with self._lock:
            if any(installed is layer for installed in self._layers):
                return
            self._layers = (*self._layers, layer)
            self._chains = weakref.WeakKeyDictionary()
            if len(self._layers) == 1:
                self._patch()

    def uninstall(self, layer: WireLayer) -> None:
        with self._lock:
            if all(installed is not layer for installed in self._layers):
                return
            self._layers = tuple(installed for installed in self._layers if installed is not layer)
            self._chains = weakref.WeakKeyDictionary()
            if not self._layers:
                self._unpatch()

    def _patch(self) -> None:
        registry = self
        sync_original = httpx2.Client._transport_for_url
        async_original = httpx2.AsyncClient._transport_for_url

        def sync_transport_for_url(client: httpx2.Client, url: httpx2.URL) -> httpx2.BaseTransport:
            return registry.chain_of(client, sync_original(client, url), registry.sync_chain)

        def async_transport_for_url(client: httpx2.AsyncClient, url: httpx2.URL) -> httpx2.AsyncBaseTransport:
            return registry.chain_of(client, async_original(client, url), registry.async_chain)

        self._originals = {httpx2.Client: sync_original, httpx2.AsyncClient: async_original}
        httpx2.Client._transport_for_url = sync_transport_for_url  # type: ignore[method-assign,assignment]
        httpx2.AsyncClient._transport_for_url = async_transport_for_url  # type: ignore[method-assign,assignment]

    def _unpatch(self) -> None:
        for client_class, original in self._originals.items():
            client_class._transport_for_url = original
        self._originals = {}

    def _parts(self, observed: tuple[WireObserver, ...]) -> tuple[list[WireObserver], WireSource | None, Clock]:
        layers = self._layers
        observers = list(observed)
        seen = {id(observer) for observer in observers}
        source: WireSource | None = None
        for layer in layers:
            for observer in layer.observers:
                if id(observer) not in seen:  # by identity: two observers may compare equal
                    seen.add(id(observer))
                    observers.append(observer)
            if layer.source is not None:
                source = layer.source
        clock = layers[0].clock if layers else time.monotonic_ns
        return observers, source, clock

    def chain_of(self, client: object, transport: _T, build: Callable[[_T], _T]) -> _T:
        """`build(transport)` for `client`, built again only when the client picks another
        transport or the layers change."""
        chains = self._chains
        try:
            known = chains.get(client)
        except TypeError:  # a client that cannot be weakly referenced: built each time
            return build(transport)
        if known is not None and known[0] is transport:
            chain: _T = known[1]
            return chain
        chain = build(transport)
        chains[client] = (transport, chain)
        return chain

    def sync_chain(self, transport: httpx2.BaseTransport) -> httpx2.BaseTransport:
        inner, observed = transport, tuple[WireObserver, ...]()
        if isinstance(transport, ObservedTransport):
            # A client handed a cafe transport keeps its observers; the installed ones join them.
            inner, observed = transport.inner, transport.observers
        observers, source, clock = self._parts(observed)
        if source is not None and not _is_source(inner):
            inner = source  # type: ignore[assignment]
        return ObservedTransport(inner, observers, clock=clock)

    def async_chain(self, transport: httpx2.AsyncBaseTransport) -> httpx2.AsyncBaseTransport:
        inner, observed = transport, tuple[WireObserver, ...]()
        if isinstance(transport, AsyncObservedTransport):
            inner, observed = transport.inner, transport.observers
        observers, source, clock = self._parts(observed)
        if source is not None and not _is_source(inner):
            inner = source  # type: ignore[assignment]
        return AsyncObservedTransport(inner, observers, clock=clock)


def _is_source(transport: object) -> bool:
    """A transport that is itself a source (a client handed a replay) keeps answering: an
    installed source never replaces it."""
    return getattr(transport, "is_wire_source", False) is True


_REGISTRY = _Registry()


def install(layer: WireLayer) -> WireLayer:
    """Install `layer` for every httpx2 client in the process until `uninstall(layer)`.
    Installing a layer twice is installing it once."""
    _REGISTRY.install(layer)
    return layer


def uninstall(layer: WireLayer) -> None:
    """Remove `layer`; removing one that is not installed does nothing. With the last layer
    gone, httpx2's clients are exactly as they were."""
    _REGISTRY.uninstall(layer)


def installed() -> tuple[WireLayer, ...]:
    """The installed layers, first installed first."""
    return _REGISTRY.layers


@contextmanager
def intercept(observers: Sequence[WireObserver] = (), *, source: WireSource | None = None,
              clock: Clock = time.monotonic_ns) -> Iterator[WireLayer]:
    """Route every httpx2 client (the `openai` SDK's included) through the observed chain
    for the block: `observers` hear each call; `source`, if given, answers in place of the
    network. Layers nest and stack; leaving the block removes this one only.

        with cafe.wire.intercept([my_observer]):
            openai.OpenAI().chat.completions.create(...)
    """
    layer = install(WireLayer(tuple(observers), source, clock))
    try:
        yield layer
    finally:
        uninstall(layer)
