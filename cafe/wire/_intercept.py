"""Route every HTTP client of every covered library (`cafe.wire._libraries`: httpx2, httpx),
however and whenever it was built, through the observed chain.

One process-wide registry holds the installed layers. While at least one is installed, each
covered library is patched (its module's `ClientLibrary.patch`): the transport a client picks
for a request (its default, a transport the user handed it such as `MockTransport`, a mounted
one, a proxy from the environment) is wrapped with the observers of every installed layer,
and, when a layer holds a source (a replay), the source answers instead of the client's
transport, so the network is never touched. Clients built before the block are covered too:
the choice happens per request. Recording, replay and telemetry each install a layer into the
same registry, so they stack instead of patching three times; the patches are put in place by
the first layer and taken out with the last.

A library is patched only once its users have imported it: one imported already is patched
at the first install, and one imported later is patched right after its import (a finder on
`sys.meta_path` waits for it while layers are installed), so the registry itself imports no
library, and a library nobody uses is never loaded.
"""

from __future__ import annotations

import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from cafe.wire._libraries import LIBRARIES, ClientLibrary, library
from cafe.wire._transport import Clock
from cafe.wire._types import WireObserver, WireSource

_T = TypeVar("_T")


@dataclass(frozen=True, eq=False)
class WireLayer:
    """What one installer adds: observers to hear every call, and optionally a source that
    answers instead of the client's own transport (the latest installed source wins)."""

    observers: tuple[WireObserver, ...] = ()
    source: WireSource | None = None
    clock: Clock = field(default=time.monotonic_ns)


class _ImportWatcher:
    """A meta path finder that, for each of `names`, runs `imported(name)` right after the
    module is first imported, then forgets the name. It finds nothing itself."""

    def __init__(self, names: Sequence[str], imported: Callable[[str], None]) -> None:
        self.names = set(names)
        self._imported = imported

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in self.names:
            return None
        self.names.discard(name)
        for finder in list(sys.meta_path):
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec  # nothing to run after: such a library is not patched
        run_module, imported = loader.exec_module, self._imported

        def exec_module(module: Any) -> None:
            run_module(module)
            imported(name)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


class _Registry:
    """The installed layers, and the patches on the covered libraries while there is any."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._layers: tuple[WireLayer, ...] = ()
        self._unpatch: dict[str, Callable[[], None]] = {}
        self._watcher: _ImportWatcher | None = None
        # Each client's last (transport picked, chain built over it), until the layers change:
        # a client picks the same transport for every request, and a chain holds no state.
        # Keyed by the client, weakly: the chain holds the transport, never the client.
        self._chains: weakref.WeakKeyDictionary[Any, tuple[Any, Any]] = weakref.WeakKeyDictionary()

    @property
    def layers(self) -> tuple[WireLayer, ...]:
        return self._layers

    @property
    def patched(self) -> tuple[str, ...]:
        """The libraries patched now: those imported while layers are installed."""
        return tuple(self._unpatch)

    def install(self, layer: WireLayer) -> None:
        # The libraries already imported, loaded before the lock is taken: our module of one
        # imports it, and that must never wait on a thread that holds its import and waits on us.
        imported = {name: library(name) for name in LIBRARIES if name in sys.modules}
        with self._lock:
            if any(installed is layer for installed in self._layers):
                return
            self._layers = (*self._layers, layer)
            self._chains = weakref.WeakKeyDictionary()
            if len(self._layers) == 1:
                self._patch_all(imported)

    def uninstall(self, layer: WireLayer) -> None:
        with self._lock:
            if all(installed is not layer for installed in self._layers):
                return
            self._layers = tuple(installed for installed in self._layers if installed is not layer)
            self._chains = weakref.WeakKeyDictionary()
            if not self._layers:
                self._unpatch_all()

    def _patch_all(self, imported: dict[str, ClientLibrary]) -> None:
        for name, found in imported.items():
            self._unpatch[name] = found.patch(self)
        waiting = [name for name in LIBRARIES if name not in self._unpatch]
        if waiting:
            self._watcher = _ImportWatcher(waiting, self._imported)
            sys.meta_path.insert(0, self._watcher)

    def _imported(self, name: str) -> None:
        """A covered library was just imported: patch it, when layers are still installed."""
        found = library(name)
        with self._lock:
            if self._layers and name not in self._unpatch:
                self._unpatch[name] = found.patch(self)
                self._chains = weakref.WeakKeyDictionary()

    def _unpatch_all(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None and watcher in sys.meta_path:
            sys.meta_path.remove(watcher)
        for name in reversed(list(self._unpatch)):
            self._unpatch.pop(name)()

    def parts(self, observed: tuple[WireObserver, ...]) -> tuple[list[WireObserver], WireSource | None, Clock]:
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


_REGISTRY = _Registry()


def install(layer: WireLayer) -> WireLayer:
    """Install `layer` for every HTTP client of every covered library in the process until
    `uninstall(layer)`. Installing a layer twice is installing it once."""
    _REGISTRY.install(layer)
    return layer


def uninstall(layer: WireLayer) -> None:
    """Remove `layer`; removing one that is not installed does nothing. With the last layer
    gone, every library's clients are exactly as they were."""
    _REGISTRY.uninstall(layer)


def installed() -> tuple[WireLayer, ...]:
    """The installed layers, first installed first."""
    return _REGISTRY.layers


def patched() -> tuple[str, ...]:
    """The covered libraries the installed layers reach now (those imported so far)."""
    return _REGISTRY.patched


@contextmanager
def intercept(observers: Sequence[WireObserver] = (), *, source: WireSource | None = None,
              clock: Clock = time.monotonic_ns) -> Iterator[WireLayer]:
    """Route every HTTP client of httpx or httpx2 (the `openai` SDK's, whichever it uses)
    through the observed chain for the block: `observers` hear each call; `source`, if given,
    answers in place of the network. Layers nest and stack; leaving the block removes this
    one only.

        with cafe.wire.intercept([my_observer]):
            openai.OpenAI().chat.completions.create(...)
    """
    layer = install(WireLayer(tuple(observers), source, clock))
    try:
        yield layer
    finally:
        uninstall(layer)
