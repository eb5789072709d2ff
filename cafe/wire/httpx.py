"""The wire seam's transports for `httpx` clients: `httpx.Client(transport=ObservedTransport(...))`,
`RecordingTransport(path)`, `ReplayTransport(path)` (and their async forms). Importing this
module imports httpx; the rest of `cafe.wire` never does."""

from __future__ import annotations

from cafe.wire._libraries.httpx import (
    AsyncObservedTransport,
    AsyncRecordingTransport,
    ObservedTransport,
    RecordingTransport,
    ReplayTransport,
    SourceTransport,
)

__all__ = [
    "AsyncObservedTransport",
    "AsyncRecordingTransport",
    "ObservedTransport",
    "RecordingTransport",
    "ReplayTransport",
    "SourceTransport",
]
