"""cafe.wire: the HTTP wire as the model seam, for any agent that calls a model over httpx2
(openai 3.x, anthropic 2.x) or httpx (openai 1.x and 2.x, groq, ollama), the café's own live
client included.

One interception, observers on it:

    with cafe.wire.intercept([observer]):    every httpx and httpx2 client in the process,
        agent()                              routed through the chain, however it was built

    ObservedTransport(inner, observers)      one transport, observed (cafe.wire's names are
      inner: HTTPTransport | MockTransport   httpx2's; cafe.wire.httpx has the same for httpx)
             | ReplayTransport (no network)
      observers: the recorder, a telemetry observer, anything with `start(request)`

An observer implements `WireObserver.start(request: WireRequest) -> CallObserver | None`;
the `CallObserver` hears `response(WireResponse)`, `chunk(bytes, at_ns)` for each piece of
the body as the caller reads it, and `end(CallOutcome)` exactly once. A source (`WireReplay`)
answers a `WireRequest` with a `WireAnswer`. None of them knows which library sent the call.

The names are loaded on first use: the value types need only the standard library and
orjson; `record`, `replay` and `intercept` import no HTTP library; the transport names import
httpx2 (those of `cafe.wire.httpx`, httpx).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cafe.wire._api import record, replay
    from cafe.wire._exchange import recorded_request_headers, recorded_response_headers
    from cafe.wire._intercept import WireLayer, install, installed, intercept, uninstall
    from cafe.wire._libraries.httpx2 import (
        AsyncObservedTransport,
        AsyncRecordingTransport,
        ObservedTransport,
        RecordingTransport,
        ReplayTransport,
    )
    from cafe.wire._recorder import WireRecorder
    from cafe.wire._replay import WireReplay
    from cafe.wire._transport import Clock
    from cafe.wire._types import (
        CallObserver,
        CallOutcome,
        FailureKind,
        Headers,
        OutcomeKind,
        WireAnswer,
        WireObserver,
        WireRequest,
        WireResponse,
        WireSource,
        failure_kind,
        header_value,
    )

_EXPORTS = {
    "AsyncRecordingTransport": "cafe.wire._libraries.httpx2",
    "RecordingTransport": "cafe.wire._libraries.httpx2",
    "ReplayTransport": "cafe.wire._libraries.httpx2",
    "WireReplay": "cafe.wire._replay",
    "WireRecorder": "cafe.wire._recorder",
    "record": "cafe.wire._api",
    "recorded_request_headers": "cafe.wire._exchange",
    "recorded_response_headers": "cafe.wire._exchange",
    "replay": "cafe.wire._api",
    "AsyncObservedTransport": "cafe.wire._libraries.httpx2",
    "CallObserver": "cafe.wire._types",
    "CallOutcome": "cafe.wire._types",
    "Clock": "cafe.wire._transport",
    "FailureKind": "cafe.wire._types",
    "Headers": "cafe.wire._types",
    "ObservedTransport": "cafe.wire._libraries.httpx2",
    "OutcomeKind": "cafe.wire._types",
    "WireLayer": "cafe.wire._intercept",
    "WireAnswer": "cafe.wire._types",
    "WireObserver": "cafe.wire._types",
    "WireRequest": "cafe.wire._types",
    "WireResponse": "cafe.wire._types",
    "WireSource": "cafe.wire._types",
    "failure_kind": "cafe.wire._types",
    "header_value": "cafe.wire._types",
    "install": "cafe.wire._intercept",
    "installed": "cafe.wire._intercept",
    "intercept": "cafe.wire._intercept",
    "uninstall": "cafe.wire._intercept",
}

__all__ = [
    "AsyncObservedTransport",
    "AsyncRecordingTransport",
    "CallObserver",
    "CallOutcome",
    "Clock",
    "FailureKind",
    "Headers",
    "ObservedTransport",
    "OutcomeKind",
    "RecordingTransport",
    "ReplayTransport",
    "WireAnswer",
    "WireLayer",
    "WireObserver",
    "WireRecorder",
    "WireReplay",
    "WireRequest",
    "WireResponse",
    "WireSource",
    "failure_kind",
    "header_value",
    "install",
    "installed",
    "intercept",
    "record",
    "recorded_request_headers",
    "recorded_response_headers",
    "replay",
    "uninstall",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cafe.wire' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
