"""The uploads an SDK makes of its own telemetry: HTTP calls, but not model calls.

An SDK that traces itself (the OpenAI Agents SDK does, by default) posts its traces with
the same HTTP client as its model calls. Such a post holds random trace ids and times, so
kept as a call it would fail every replay; it is not part of the conversation either. The
recorder keeps none of them, and a replay answers each as the service does, so the program
neither breaks nor reaches the network. docs/wire.md lists them.
"""

from __future__ import annotations

from dataclasses import dataclass

from cafe.wire._types import WireAnswer


@dataclass(frozen=True)
class TelemetryUpload:
    """One SDK's telemetry endpoint, by method and path (any host, any query), and the
    answer its service gives to an accepted upload."""

    method: str
    path: str
    sdk: str
    status: int
    content_type: str | None = None
    body: bytes = b""

    def answer(self) -> WireAnswer:
        headers = () if self.content_type is None else (("content-type", self.content_type),)
        return WireAnswer(self.status, headers, content=self.body)


TELEMETRY_UPLOADS = (
    # agents.tracing.processors.BackendSpanExporter: `{"data": [...]}` with the API key, on
    # `OpenAI-Beta: traces=v1`; the service accepts it with 204 No Content.
    TelemetryUpload("POST", "/v1/traces/ingest", "the OpenAI Agents SDK's trace export", 204),
)

_BY_ROUTE = {(upload.method, upload.path): upload for upload in TELEMETRY_UPLOADS}


def telemetry_upload(method: str, target: str) -> TelemetryUpload | None:
    """The declared telemetry upload a request to `target` (a path with its query) is, if any."""
    return _BY_ROUTE.get((method, target.partition("?")[0]))
