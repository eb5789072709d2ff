"""The HTTP client libraries the wire seam covers, one module each (as VCR.py keeps one stub
per library): `httpx2` (openai 3.x, anthropic 2.x, google-genai, mistralai) and `httpx`
(openai 1.x and 2.x, groq, ollama, litellm's core).

A library's module does that library's part and nothing else: the patch that routes every
client of it through the observed chain, its observed transports and streams, and its
adapter of a source (a replay answers in its objects). Everything it hands on is
library-neutral (`WireRequest`, `WireResponse`, chunks, `WireAnswer`), so the recorder, the
replay and the telemetry observer never know which library sent a call, and a recording made
through one replays through the other.

A library is imported only by its users: `LIBRARIES` names the modules, and the registry
(`cafe.wire._intercept`) patches one when it is imported, never importing it itself. Another
library (aiohttp, requests) is one more module here with a `LIBRARY` that is a `ClientLibrary`,
and one more entry in `LIBRARIES`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from cafe.wire._transport import Clock
    from cafe.wire._types import WireObserver, WireSource

_T = TypeVar("_T")

LIBRARIES: dict[str, str] = {
    "httpx2": "cafe.wire._libraries.httpx2",
    "httpx": "cafe.wire._libraries.httpx",
}
"""Each covered library, by the name its users import, and the module of ours that covers it."""

SHOWN = " or ".join(sorted(LIBRARIES))
"""The covered libraries, as a message names them (`httpx or httpx2`)."""

NO_CALL = f"no call went through {SHOWN}"
"""What a run that used neither library is told, in one line."""


class Chains(Protocol):
    """What a library's patch asks the registry for each request."""

    def parts(self, observed: tuple[WireObserver, ...]) -> tuple[list[WireObserver], WireSource | None, Clock]:
        """The observers (those given first, then every installed layer's), the latest
        installed source, and the clock."""
        ...

    def chain_of(self, client: object, transport: _T, build: Callable[[_T], _T]) -> _T:
        """`build(transport)` for `client`, built again only when the client picks another
        transport or the layers change."""
        ...


class ClientLibrary(Protocol):
    """One client library's part of the seam."""

    @property
    def name(self) -> str:
        """The module its users import (`httpx2`)."""
        ...

    def patch(self, chains: Chains) -> Callable[[], None]:
        """Route every client of the library, however and whenever it was built, through
        `chains` (asked on each request); returns what leaves the library as it was."""
        ...


class TransportLibrary(ClientLibrary, Protocol):
    """A library whose clients send through a transport object (httpx, httpx2): an SDK's
    client of it can be built observed."""

    def observed_client(self, client: Any, observers: Sequence[WireObserver], clock: Clock) -> None:
        """Observe every transport `client` may pick (its own, each mount: a proxy from the
        environment), so that a proxied call is heard like a direct one."""
        ...

    def answering_client(self, answering: Any, observers: Sequence[WireObserver], clock: Clock,
                         timeout: Any) -> Any:
        """A client over `answering` (a source, or one of the library's transports) only,
        observed, that never takes a proxy from the environment."""
        ...


def installed_libraries() -> tuple[str, ...]:
    """The covered libraries installed in this Python (looked up, not imported)."""
    import importlib.util

    return tuple(name for name in sorted(LIBRARIES) if importlib.util.find_spec(name) is not None)


def library(name: str) -> ClientLibrary:
    """The `ClientLibrary` of `name` (a key of `LIBRARIES`), importing the library."""
    found: ClientLibrary = importlib.import_module(LIBRARIES[name]).LIBRARY
    return found


def library_of(client_class: type) -> str | None:
    """Which covered library a client class (an SDK's own `httpx.Client` subclass, say)
    belongs to, by the module of its bases; None for none of them."""
    for base in client_class.__mro__:
        top = base.__module__.split(".", 1)[0]
        if top in LIBRARIES:
            return top
    return None
