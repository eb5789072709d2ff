"""The café's own live client on the wire: its SDK client built over an `ObservedTransport`,
and `ExchangeLog`, the observer a café recording takes each call's HTTP exchange from.

A café shift recorded live keeps, on each call line, the café's call (`request`: the four
arguments of `chat`; `response`: the reply the client returned) and the HTTP exchange that
made it, the JSON bodies as sent and answered included (`exchange.request_json`,
`exchange.response_json`), so the same file replays through the café's `ReplayClient` and
through the wire (`ReplayTransport`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from cafe.wire._recorder import CollectedCall, exchange_line
from cafe.wire._transport import Clock
from cafe.wire._types import CallOutcome, WireObserver, WireRequest


class ExchangeLog:
    """Keeps the exchange of each call it hears while `armed` (a recorder arms it), until
    `take()`; unarmed, it starts no call observer, so a shift that records nothing pays
    one attribute read a call."""

    def __init__(self, clock: Clock = time.monotonic_ns) -> None:
        self.armed = False
        self._clock = clock
        self._lock = threading.Lock()
        self._ended: list[dict[str, Any]] = []

    def __repr__(self) -> str:
        return f"ExchangeLog(armed={self.armed}, kept={len(self._ended)})"

    def start(self, request: WireRequest) -> _LoggedCall | None:
        if not self.armed:
            return None
        return _LoggedCall(self, request)

    def take(self) -> list[dict[str, Any]]:
        """The `exchange` fields of the calls ended since the last `take`, in the order they
        ended (an SDK's retries first, the call that answered last), each with the JSON
        bodies as sent and answered (`request_json`, `response_json`)."""
        with self._lock:
            taken, self._ended = self._ended, []
        return taken

    def _keep(self, exchange: dict[str, Any]) -> None:
        with self._lock:
            self._ended.append(exchange)


class _LoggedCall(CollectedCall):
    __slots__ = ("_log",)

    def __init__(self, log: ExchangeLog, request: WireRequest) -> None:
        super().__init__(request)
        self._log = log

    def finished(self, outcome: CallOutcome) -> None:
        body, answer, exchange = exchange_line(self.request, self.head, self.chunks, outcome)
        self._log._keep({**exchange, "request_json": body, "response_json": answer})


def sdk_http_client(observers: Sequence[WireObserver], *, transport: Any = None,
                    clock: Clock = time.monotonic_ns) -> Any:
    """The HTTP client for an `openai.OpenAI`, of the library the installed SDK sends through
    (httpx2 for openai 3.x, httpx for 1.x and 2.x), every call observed.

    Over the network (no `transport`): the SDK's own default client (its connection limits,
    redirects, and the environment's proxies), each of its transports observed. Over a
    `transport` (a source such as a `cafe.wire.WireReplay`, or a transport of that library
    such as a `MockTransport`): that only, and never a proxy the environment names, so
    nothing reaches the network."""
    import openai

    from cafe.wire._libraries import TransportLibrary, library, library_of

    name = library_of(openai.DefaultHttpxClient)
    if name is None:  # pragma: no cover - an openai on a client library cafe does not cover
        raise TypeError(f"openai {openai.__version__} sends through a client library cafe.wire does not cover")
    covered: TransportLibrary = library(name)  # type: ignore[assignment]
    if transport is not None:
        return covered.answering_client(transport, observers, clock, openai.DEFAULT_TIMEOUT)
    client = openai.DefaultHttpxClient()
    covered.observed_client(client, observers, clock)
    return client
