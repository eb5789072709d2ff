"""The wire seam's transports for `httpx2` clients: `httpx2.Client(transport=ObservedTransport(...))`,
`RecordingTransport(path)`, `ReplayTransport(path)` (and their async forms). Importing this
module imports httpx2; the rest of `cafe.wire` never does."""

from __future__ import annotations

from cafe.wire._libraries.httpx2 import (
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
