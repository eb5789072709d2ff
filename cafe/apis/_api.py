"""What a reading of one model API is: the protocol each API's module implements once, for
telemetry, pages, replay reports and recordings alike."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from cafe.apis._model import CallRequest, CallResponse, Operation, RequestContent


class StreamReading(Protocol):
    """One streamed answer read event by event, as the caller reads it.

    `wants(data)` says, from the event's raw `data` bytes alone, whether the event must be
    decoded: a reading that only needs metadata decodes the events that carry it (the head,
    the finish, the usage) and passes over the words in between. Every event `wants` accepts
    is decoded and handed to `event`; `result()` is the answer read so far."""

    def wants(self, data: bytes) -> bool: ...

    def event(self, event: Mapping[str, Any]) -> None: ...

    def result(self) -> CallResponse: ...


class Api(Protocol):
    """The reading of one model API, by its wire format (never an SDK's Python types).

    `handles` tells the API's calls by method and path; `request` reads the parameters
    without the conversation, from the top-level `request_keys` only (so a reader that needs
    no conversation decodes those alone: `cafe.apis.request_head`); `request_content` reads
    the conversation; `response` reads a
    JSON answer (its output messages too when `content`); `stream` reads a streamed answer;
    `assembled` puts a stream's events together as the JSON answer the API would have given
    unstreamed (what a recording keeps as the call's `response`); `summary` describes a
    request in one line that holds no conversation text."""

    name: str
    operation: Operation
    request_keys: frozenset[str]

    def handles(self, method: str, path: str) -> bool: ...

    def request(self, body: Mapping[str, Any], *, host: str | None) -> CallRequest: ...

    def request_content(self, body: Mapping[str, Any]) -> RequestContent: ...

    def response(self, document: Mapping[str, Any], *, content: bool) -> CallResponse: ...

    def stream(self, *, content: bool) -> StreamReading: ...

    def assembled(self, events: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None: ...

    def summary(self, body: Mapping[str, Any]) -> str: ...
