"""What an export's attempts at the transport did: the evidence for an export that is still
in flight when shutdown's bound runs out.

An OTLP exporter makes one or more attempts (requests) per export and sleeps between them
(its retry backoff). At the bound, an export with an attempt sent and not yet answered may
still be stored whole by its receiver, and so may one whose last attempt ended in a way that
says nothing of delivery (a read timeout, a connection dropped mid-answer): those are
unconfirmed. One that is only sleeping, with every attempt ended before anything reached a
receiver (connection refused, a name that does not resolve, a receiver's error status), has
delivered nothing, and the next attempt will never be made: it is lost.

`AttemptLog` counts, per exporter, the attempts of the export under way: `begin` and `end`
bracket each one at the transport (`watch_http_session` wraps the `requests.Session` the
OTLP/HTTP exporter is handed; `watch_grpc_exporter` the OTLP/gRPC exporter's stub), with
how it ended: `DELIVERED`, `NOT_DELIVERED` or `UNKNOWN`, and a kind (an HTTP status, a gRPC
status name, an exception class: low cardinality, never a message). `withdraw()` is called
at the bound: from then on no attempt starts (`begin` raises `AttemptsWithdrawn` before
sending), so the verdict it returns cannot be overtaken by an attempt that wakes from its
backoff a moment later.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass
from typing import Any


class Delivery(enum.Enum):
    DELIVERED = "delivered"  # the receiver answered success
    NOT_DELIVERED = "not_delivered"  # ended before anything reached a receiver, or refused by it
    UNKNOWN = "unknown"  # sent, and no answer says what became of it


@dataclass(frozen=True)
class AttemptEnd:
    delivery: Delivery
    kind: str  # e.g. "503", "UNAVAILABLE", "ConnectionError", "ReadTimeout"


class AttemptsWithdrawn(RuntimeError):
    """Raised in place of an attempt started after shutdown settled the export's account."""

    def __init__(self) -> None:
        super().__init__("no export attempt starts after shutdown's bound")


class InFlight(enum.Enum):
    """What is known at the bound of an export that has not returned."""

    UNCONFIRMED = "unconfirmed"  # an attempt is outstanding, or one ended with its outcome unknown
    DROPPED = "dropped"  # every attempt ended not delivered, and none will follow
    UNSENT = "unsent"  # no attempt reached the transport, and none will
    DELIVERED = "delivered"  # its last attempt was answered success; the exporter is returning


@dataclass(frozen=True)
class Attempts:
    """The attempts of the export under way, as counted at the transport."""

    started: int = 0
    outstanding: int = 0
    delivered: int = 0
    unknown: int = 0
    last: AttemptEnd | None = None

    def in_flight(self) -> InFlight:
        if self.outstanding or self.unknown:
            return InFlight.UNCONFIRMED
        if self.last is None:
            return InFlight.UNSENT
        if self.last.delivery is Delivery.DELIVERED:
            return InFlight.DELIVERED
        # The last attempt was not delivered; any earlier one that was (a request the
        # exporter split in parts) leaves the export part delivered: not known lost.
        return InFlight.UNCONFIRMED if self.delivered else InFlight.DROPPED

    def why_unconfirmed(self) -> str:
        """Our words for an `UNCONFIRMED` verdict."""
        if self.outstanding:
            return "an attempt was sent and had no answer yet"
        if self.unknown:
            kind = self.last.kind if self.last is not None and self.last.delivery is Delivery.UNKNOWN else None
            return ("an attempt ended without saying whether it was delivered"
                    + (f" ({kind})" if kind else ""))
        return "part of it was delivered"


class AttemptLog:
    """Thread-safe: attempts end on the exporter's thread, shutdown reads on its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._attempts = Attempts()
        self._withdrawn = False
        self._attached = False

    @property
    def attached(self) -> bool:
        """Whether a transport counts its attempts here (without one the log knows nothing)."""
        with self._lock:
            return self._attached

    def attach(self) -> None:
        with self._lock:
            self._attached = True

    def start_export(self) -> None:
        """A new export begins: its attempts are counted from zero."""
        with self._lock:
            self._attempts = Attempts()

    def begin(self) -> None:
        with self._lock:
            if self._withdrawn:
                raise AttemptsWithdrawn()
            found = self._attempts
            self._attempts = Attempts(found.started + 1, found.outstanding + 1, found.delivered, found.unknown,
                                      found.last)

    def end(self, how: AttemptEnd) -> None:
        with self._lock:
            found = self._attempts
            self._attempts = Attempts(found.started, max(found.outstanding - 1, 0),
                                      found.delivered + (how.delivery is Delivery.DELIVERED),
                                      found.unknown + (how.delivery is Delivery.UNKNOWN), how)

    def snapshot(self) -> Attempts:
        with self._lock:
            return self._attempts

    def withdraw(self) -> Attempts:
        """No attempt starts from now on; the attempts of the export under way, as they stand."""
        with self._lock:
            self._withdrawn = True
            return self._attempts


# --- OTLP/HTTP: the requests.Session the exporter is handed --------------------------------


def http_answer(status: int) -> AttemptEnd:
    """A receiver's answer: only 2xx delivered (the SDK does not follow a redirect)."""
    return AttemptEnd(Delivery.DELIVERED if 200 <= status < 300 else Delivery.NOT_DELIVERED, str(status))


def http_failure(error: BaseException) -> AttemptEnd:
    """An attempt that raised: not delivered when no connection was made (refused, reset
    while connecting, a name that does not resolve, a connect timeout); unknown otherwise
    (a read timeout, a connection dropped after the request went out)."""
    kind = type(error).__name__
    return AttemptEnd(Delivery.NOT_DELIVERED if _never_connected(error) else Delivery.UNKNOWN, kind)


def _never_connected(error: BaseException) -> bool:
    from urllib3.exceptions import ConnectTimeoutError, MaxRetryError

    # requests wraps urllib3's error as its first argument; urllib3 keeps the cause of a
    # MaxRetryError in `reason`. Only that structure is followed, never `__context__`: an
    # error raised while handling another says nothing of the other's attempt.
    found: object = error
    for _ in range(4):
        if isinstance(found, ConnectTimeoutError):  # NewConnectionError and NameResolutionError too
            return True
        if isinstance(found, MaxRetryError):
            found = found.reason
        elif isinstance(found, BaseException) and found.args and isinstance(found.args[0], BaseException):
            found = found.args[0]
        else:
            return False
    return False


def watch_http_session(session: Any, log: AttemptLog) -> None:
    """Count every request `session` (a `requests.Session`) sends in `log`. Its response
    hooks (`cafe_otel._export.partial_success`) run inside `send`, so before the attempt ends."""
    send = session.send

    def counted_send(request: Any, **kwargs: Any) -> Any:
        log.begin()
        try:
            response = send(request, **kwargs)
        except BaseException as error:
            log.end(http_failure(error))
            raise
        log.end(http_answer(int(response.status_code)))
        return response

    session.send = counted_send
    log.attach()


# --- OTLP/gRPC: the exporter's stub -----------------------------------------------------------

# What gRPC's client says of a call that found no connection to send it on: the resolver
# found no address, or no address could be connected to. A receiver that sends such a text
# in an UNAVAILABLE status of its own has answered that it did not take the request, which
# is not delivered too. Any other UNAVAILABLE (a connection dropped mid-call, a server going
# away) may have been stored, so it is unknown.
_NO_CONNECTION = ("failed to connect to all addresses", "DNS resolution failed", "errors resolving")
# Statuses only an answer gives (the receiver's, or the client's refusal to send a message
# too large): the request was not taken. DEADLINE_EXCEEDED, CANCELLED, UNKNOWN, INTERNAL and
# any other UNAVAILABLE may end a call whose request a receiver stored, so they are unknown.
_REFUSED = frozenset({"INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED",
                      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
                      "UNIMPLEMENTED", "UNAUTHENTICATED", "DATA_LOSS"})


def grpc_failure(error: BaseException) -> AttemptEnd:
    code = getattr(error, "code", None)
    details = getattr(error, "details", None)
    try:
        status = code() if callable(code) else None
        text = details() if callable(details) else None
    except Exception:  # an RpcError that is not a call: nothing to read
        status, text = None, None
    name = getattr(status, "name", None)
    if not isinstance(name, str):
        return AttemptEnd(Delivery.UNKNOWN, type(error).__name__)
    if name in _REFUSED or (name == "UNAVAILABLE" and isinstance(text, str) and text.startswith(_NO_CONNECTION)):
        return AttemptEnd(Delivery.NOT_DELIVERED, name)
    return AttemptEnd(Delivery.UNKNOWN, name)


class CountedStub:
    """A gRPC OTLP service stub whose `Export` calls are counted in an `AttemptLog`."""

    def __init__(self, stub: Any, log: AttemptLog) -> None:
        self._stub = stub
        self._log = log

    def Export(self, *args: Any, **kwargs: Any) -> Any:
        self._log.begin()
        try:
            answer = self._stub.Export(*args, **kwargs)
        except BaseException as error:
            self._log.end(grpc_failure(error))
            raise
        self._log.end(AttemptEnd(Delivery.DELIVERED, "OK"))
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stub, name)


def watch_grpc_exporter(exporter: Any, log: AttemptLog) -> bool:
    """Count the attempts of an SDK OTLP/gRPC exporter (1.45's `OTLPExporterMixin`): its stub
    is `_client`, and `_stub` builds a new one when the exporter reconnects after UNAVAILABLE,
    so both are wrapped. False (nothing changed) when the exporter has not that shape: its
    in-flight exports are then unconfirmed at the bound, as for any exporter we cannot see into."""
    client, make_stub = getattr(exporter, "_client", None), getattr(exporter, "_stub", None)
    if client is None or not callable(make_stub) or not callable(getattr(client, "Export", None)):
        return False

    def counted_stub(channel: Any) -> CountedStub:
        return CountedStub(make_stub(channel), log)

    exporter._stub = counted_stub
    exporter._client = CountedStub(client, log)
    log.attach()
    return True
