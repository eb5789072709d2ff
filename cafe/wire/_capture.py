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

import httpx2

from cafe.wire._recorder import CollectedCall, exchange_line
from cafe.wire._transport import Clock, ObservedTransport
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


def sdk_http_client(observers: Sequence[WireObserver], *, transport: httpx2.BaseTransport | None = None,
                    clock: Clock = time.monotonic_ns) -> httpx2.Client:
    """The httpx2 client for an `openai.OpenAI`, every call through an `ObservedTransport`.

    Over the network (no `transport`): the SDK's own default client (its connection limits,
    redirects, and the environment's proxies), each of its transports observed. Over a
    `transport` (a replay, a `MockTransport`): that transport only, and never a proxy the
    environment names, so nothing reaches the network."""
    import openai

    if transport is not None:
        return httpx2.Client(transport=ObservedTransport(transport, observers, clock=clock), trust_env=False,
                             follow_redirects=True, timeout=openai.DEFAULT_TIMEOUT)
    client = openai.DefaultHttpxClient()
    # httpx2 picks a mount (a proxy from the environment) or the default transport per
    # request; each is observed, so a proxied call is recorded like a direct one.
    client._transport = ObservedTransport(client._transport, observers, clock=clock)
    client._mounts = {pattern: None if mounted is None else ObservedTransport(mounted, observers, clock=clock)
                      for pattern, mounted in client._mounts.items()}
    return client
