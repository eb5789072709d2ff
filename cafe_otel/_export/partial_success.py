"""What an OTLP receiver took the request for but did not keep: OTLP's partial success.

A receiver that keeps only part of a well-formed request still answers 2xx, with an
`Export*ServiceResponse` whose `partial_success` counts the items it rejected. The SDK's
OTLP/HTTP exporters return SUCCESS for any 2xx without reading that body, so an account
built on their verdict alone would call rejected spans delivered. The semantic conventions
(`otel.sdk.exporter.span.exported`) say rejected items count as failed, with `error.type`
`rejected` when the receiver gives no reason of ours to use.

`RejectionCounter` reads each 2xx body through a response hook on the `requests.Session`
the exporter is handed (requests' public hook API), and the processor asks it, after each
export the exporter called a success, how many of that batch were rejected. The receiver's
own `error_message` is never kept: it is server text and may echo what it was sent. A body
that is not an OTLP response leaves the items counted as delivered (the status said so) and
is noted. Over gRPC the SDK's exporter reads no answer either (any OK is a success): its
stub is wrapped (`watch_grpc_answers`), so that each answer's `partial_success` is read the
same way.

The same hook keeps the status of an answer that is not 2xx: the SDK's OTLP/HTTP exporters
call any status below 400 a success, but a 3xx (an http-to-https redirect, say, which they
do not follow) delivered nothing. `take_refusal()` hands that status to the processor,
which counts the whole export as not delivered.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from cafe_otel._config.variables import Signal

# The protobuf message, its counter's field name, and the same in OTLP/JSON.
_ANSWERS: dict[Signal, tuple[Any, str, str]] = {
    "traces": (ExportTraceServiceResponse, "rejected_spans", "rejectedSpans"),
    "metrics": (ExportMetricsServiceResponse, "rejected_data_points", "rejectedDataPoints"),
    "logs": (ExportLogsServiceResponse, "rejected_log_records", "rejectedLogRecords"),
}
# No OTLP response is this large; a longer body is not read as one.
MAX_ANSWER_BYTES = 64 * 1024


def refusal_status(refused: Callable[[], int | None] | None, note: Callable[[str], None],
                   where: str) -> int | None:
    """The non-2xx status `refused` reports for the last export (None: none, or no `refused`);
    a callable that fails is noted under `where` and reports none."""
    if refused is None:
        return None
    try:
        status = refused()
    except Exception as error:  # whatever it raised, the account must go on
        note(f"{where}: reading the answer's status failed ({type(error).__name__})")
        return None
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def rejected_count(rejected: Callable[[], int] | None, sent: int, note: Callable[[str], None],
                   where: str) -> int:
    """How many of the `sent` items the receiver rejected, by asking `rejected` (None: none):
    never more than were sent, and a callable that fails costs its count (noted under `where`),
    not the export thread that asked."""
    if rejected is None:
        return 0
    try:
        return max(0, min(int(rejected()), sent))
    except Exception as error:  # whatever it raised, the account must go on
        note(f"{where}: the rejected count failed ({type(error).__name__}); the items are counted as delivered")
        return 0


class RejectionCounter:
    """Counts the items receivers reported rejected, until `take()` collects them."""

    def __init__(self, signal: Signal, *, on_unreadable: Callable[[str], None] | None = None) -> None:
        self._message, self._field, self._json_field = _ANSWERS[signal]
        self._signal = signal
        self._on_unreadable = on_unreadable
        self._lock = threading.Lock()
        self._rejected = 0
        self._refusal: int | None = None

    def __repr__(self) -> str:
        return f"RejectionCounter({self._signal!r}, pending={self._rejected})"

    def attach(self, session: Any) -> None:
        """Read every answer `session` (a `requests.Session`) receives."""
        session.hooks["response"].append(self._on_response)

    def take(self) -> int:
        """The items rejected since the last call, and start again from zero."""
        with self._lock:
            rejected, self._rejected = self._rejected, 0
        return rejected

    def take_refusal(self) -> int | None:
        """The status of the last answer that was not 2xx since the last call (None: none)."""
        with self._lock:
            refusal, self._refusal = self._refusal, None
        return refusal

    def add(self, rejected: int) -> None:
        with self._lock:
            self._rejected += rejected

    def _on_response(self, response: Any, *args: object, **kwargs: object) -> None:
        # Returns None: requests then keeps the response as it was.
        if not 200 <= response.status_code < 300:
            with self._lock:
                self._refusal = int(response.status_code)
            return
        body = response.content or b""
        if not body:
            return  # no body: nothing was reported rejected
        rejected = self.rejected_in(body, response.headers.get("Content-Type", ""))
        if rejected is None:
            if self._on_unreadable is not None:
                self._on_unreadable(f"OTLP {self._signal} export: the receiver answered {response.status_code} "
                                    "with a body that is not an OTLP response; its items are counted as delivered")
            return
        if rejected:
            self.add(rejected)

    def read_answer(self, answer: Any) -> None:
        """Count what an OTLP/gRPC answer (an `Export*ServiceResponse`) reports rejected."""
        partial = getattr(answer, "partial_success", None)
        count = getattr(partial, self._field, None)
        if type(count) is not int or count < 0:
            if self._on_unreadable is not None:
                self._on_unreadable(f"OTLP {self._signal} export: the receiver's gRPC answer is not an OTLP "
                                    "response; its items are counted as delivered")
            return
        if count:
            self.add(count)

    def rejected_in(self, body: bytes, content_type: str = "") -> int | None:
        """The rejected count an answer's body reports (0 for none), or None when the body is
        not an OTLP response of this signal."""
        if len(body) > MAX_ANSWER_BYTES:
            return None
        if "json" in content_type.lower():
            return self._rejected_in_json(body)
        try:
            answer = self._message.FromString(body)
        except Exception:  # protobuf's DecodeError, and whatever a hostile body provokes
            return None
        count: int = getattr(answer.partial_success, self._field)
        return count if count >= 0 else None

    def _rejected_in_json(self, body: bytes) -> int | None:
        try:
            answer = json.loads(body)
        except (ValueError, RecursionError):
            return None
        if not isinstance(answer, dict):
            return None
        partial = answer.get("partialSuccess", answer.get("partial_success", {}))
        if not isinstance(partial, dict):
            return None
        value = partial.get(self._json_field, partial.get(self._field, 0))
        # OTLP/JSON writes 64-bit integers as strings.
        if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 20:
            value = int(value)
        if type(value) is not int or value < 0:
            return None
        return value


class AnswerReadingStub:
    """An OTLP/gRPC service stub whose `Export` answers are read by a `RejectionCounter`."""

    def __init__(self, stub: Any, counter: RejectionCounter) -> None:
        self._stub = stub
        self._counter = counter

    def Export(self, *args: Any, **kwargs: Any) -> Any:
        answer = self._stub.Export(*args, **kwargs)
        self._counter.read_answer(answer)
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stub, name)


def watch_grpc_answers(exporter: Any, counter: RejectionCounter) -> bool:
    """Read the answers of an SDK OTLP/gRPC exporter (1.45's `OTLPExporterMixin`): its stub is
    `_client`, and `_stub` builds a new one when the exporter reconnects after UNAVAILABLE, so
    both are wrapped (as `cafe_otel._export.attempts.watch_grpc_exporter` does). False
    (nothing changed) when the exporter has not that shape: nothing is then counted rejected."""
    client, make_stub = getattr(exporter, "_client", None), getattr(exporter, "_stub", None)
    if client is None or not callable(make_stub) or not callable(getattr(client, "Export", None)):
        return False

    def reading_stub(channel: Any) -> AnswerReadingStub:
        return AnswerReadingStub(make_stub(channel), counter)

    exporter._stub = reading_stub
    exporter._client = AnswerReadingStub(client, counter)
    return True
