"""The base of clients that wrap another (tracing, recording): what the wrapped client is
(its model, provider, call count, endpoint, secrets) stays visible through the wrapper, so
wrappers stack in any order."""

from __future__ import annotations

from typing import Any

from cafe.counter.clients.base import ChatClient


class WrappedClient:
    """A client around `inner`. Every other attribute is the inner client's, so a wrapper is
    a `HoldsSecrets` or a `NetworkClient` (cafe.counter.clients.base) exactly when its inner is."""

    def __init__(self, inner: ChatClient) -> None:
        self.inner = inner

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def provider(self) -> str:
        return self.inner.provider

    @property
    def calls(self) -> int:
        return self.inner.calls

    def __getattr__(self, name: str) -> Any:
        # Without `inner` (a copy being built) there is nothing to delegate to: recursing
        # would never end.
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)
