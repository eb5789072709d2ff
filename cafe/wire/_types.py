"""The values and protocols of the wire seam: what an observer is told about one HTTP call.

Observers never see an SDK object, only these values: the request as sent (method, target,
headers, body bytes), the response head, each body chunk as the caller reads it, and one
outcome. A source (a replay) is handed the same `WireRequest` and gives a `WireAnswer`. The
stable contract is the wire format of the API, not the SDK's or the HTTP library's Python
types: each client library's module (`cafe.wire._libraries`) turns its own into these.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import orjson

Headers = tuple[tuple[str, str], ...]
"""Header pairs in the order sent or received; names lowercased, values as they are."""


def header_value(headers: Headers, name: str) -> str | None:
    """The first value of header `name` (lowercase), or None."""
    for key, value in headers:
        if key == name:
            return value
    return None


@dataclass(frozen=True, slots=True)
class WireRequest:
    """One request as the transport sends it.

    `headers` holds every header, credentials included (an observer that writes or exports
    them filters them itself: `cafe.wire.recorded_request_headers`); the repr shows only the
    method, the path and the header names, so that a traceback or a log line never carries a
    key, a query string or the conversation."""

    method: str
    scheme: str
    host: str
    port: int | None
    target: str
    """The path and the query, as sent (`/v1/chat/completions?api-version=...`)."""
    headers: Headers
    body: bytes = field(repr=False)
    started_ns: int
    """The injected monotonic clock when the transport received the request."""

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def query(self) -> str:
        parts = self.target.split("?", 1)
        return parts[1] if len(parts) == 2 else ""

    def header(self, name: str) -> str | None:
        return header_value(self.headers, name.lower())

    def json(self) -> Any | None:
        """The body decoded as JSON, or None when it is empty or not JSON."""
        if not self.body:
            return None
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError:
            return None

    def __repr__(self) -> str:
        names = ", ".join(sorted({name for name, _ in self.headers}))
        return f"WireRequest({self.method} {self.path}, headers: {names}, body: {len(self.body)} bytes)"


@dataclass(frozen=True, slots=True)
class WireResponse:
    """The head of a response: status and headers, and when the transport returned it."""

    status: int
    headers: Headers = field(repr=False)
    at_ns: int

    def header(self, name: str) -> str | None:
        return header_value(self.headers, name.lower())

    @property
    def is_event_stream(self) -> bool:
        content_type = self.header("content-type") or ""
        return content_type.split(";", 1)[0].strip().lower() == "text/event-stream"


class OutcomeKind(enum.Enum):
    COMPLETED = "completed"
    """The body was read to its end."""
    CLOSED_EARLY = "closed_early"
    """The caller closed the response, or dropped it to the garbage collector, before its end."""
    FAILED = "failed"
    """The transport raised, before the response or while the body was read."""


class FailureKind(enum.Enum):
    TIMEOUT = "timeout"
    CONNECT = "connect_error"
    READ = "read_error"
    WRITE = "write_error"
    PROTOCOL = "protocol_error"
    TRANSPORT = "transport_error"
    CANCELLED = "cancelled"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """How one call ended. `failure` and `error_type` are set only for `FAILED`:
    `error_type` is the exception's qualified class name as its library exports it
    (`httpx2.ReadTimeout`, `httpx.ConnectError`), never its message, which may quote a URL or
    a body."""

    kind: OutcomeKind
    at_ns: int
    failure: FailureKind | None = None
    error_type: str | None = None

    @classmethod
    def completed(cls, at_ns: int) -> CallOutcome:
        return cls(OutcomeKind.COMPLETED, at_ns)

    @classmethod
    def closed_early(cls, at_ns: int) -> CallOutcome:
        return cls(OutcomeKind.CLOSED_EARLY, at_ns)

    @classmethod
    def failed(cls, at_ns: int, error: BaseException) -> CallOutcome:
        return cls(OutcomeKind.FAILED, at_ns, failure_kind(error), _qualified(type(error)))


def _qualified(kind: type[BaseException]) -> str:
    """`module.Class`, the module named as far as its public part: a class defined in a
    private submodule is exported by the package above it (`httpx._exceptions.ReadTimeout`
    is `httpx.ReadTimeout`)."""
    module = kind.__module__
    if module == "builtins":
        return kind.__qualname__
    parts = module.split(".")
    public = next((at for at, part in enumerate(parts) if part.startswith("_")), len(parts))
    if public:
        module = ".".join(parts[:public])
    return f"{module}.{kind.__qualname__}"


def failure_kind(error: BaseException) -> FailureKind:
    """The kind of a transport failure, by the exception class of httpx or httpx2 (both name
    them alike; no import of either is needed to tell: the classes are matched by name along
    the error's type's MRO)."""
    names = {kind.__name__ for kind in type(error).__mro__}
    if "CancelledError" in names:
        return FailureKind.CANCELLED
    if "TimeoutException" in names or "TimeoutError" in names:
        return FailureKind.TIMEOUT
    if "ConnectError" in names:
        return FailureKind.CONNECT
    if "ReadError" in names:
        return FailureKind.READ
    if "WriteError" in names:
        return FailureKind.WRITE
    if "ProtocolError" in names:
        return FailureKind.PROTOCOL
    if "TransportError" in names:
        return FailureKind.TRANSPORT
    return FailureKind.OTHER


@runtime_checkable
class CallObserver(Protocol):
    """Hears one call, from its response to its end.

    The transport calls `response` at most once, then `chunk` for each piece of the body in
    the order the caller reads it (raw bytes as the server sent them, before any content
    decoding), then `end` exactly once, however the call ends: the body read to its end, the
    response closed or garbage-collected first, or a failure (then `response` may never have
    been called). Times are readings of the transport's injected monotonic clock, in ns."""

    def response(self, response: WireResponse) -> None: ...

    def chunk(self, data: bytes, at_ns: int) -> None: ...

    def end(self, outcome: CallOutcome) -> None: ...


@runtime_checkable
class WireObserver(Protocol):
    """Hears every call of a transport: `start` is told of each request before it is sent
    and returns the observer of that call, or None to skip it.

    An exception an observer raises propagates to the code that made the call (a recorder
    that cannot write must fail the test); an observer that must never fail a call, such as
    a telemetry one, catches its own errors. `end` still reaches every observer that started."""

    def start(self, request: WireRequest) -> CallObserver | None: ...


@dataclass(frozen=True, slots=True)
class WireAnswer:
    """What a source gives in place of the network: the response head, and its body whole
    (`content`) or as the chunks of a stream, each one read, then `end_error` raised when it
    is set (a stream whose recorded caller left it early has no end to give)."""

    status: int
    headers: Headers = field(repr=False)
    content: bytes = field(default=b"", repr=False)
    chunks: tuple[bytes, ...] | None = field(default=None, repr=False)
    end_error: BaseException | None = None


class RecordedFailure(Exception):
    """A source's answer that the call failed on the wire, of `failure` (a `FailureKind`
    value): each client library raises its own exception of that kind in its place."""

    def __init__(self, failure: str, message: str) -> None:
        super().__init__(message)
        self.failure = failure


@runtime_checkable
class WireSource(Protocol):
    """Answers requests in place of the network (a replay), whichever library sent them:
    `answer` is handed the request (its `started_ns` is 0: a source keeps no time) and gives
    the answer, or raises (a refusal, a `RecordedFailure`)."""

    def answer(self, request: WireRequest) -> WireAnswer: ...
