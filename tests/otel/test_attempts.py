"""An export still in flight at shutdown's bound is settled by what its attempts at the
transport did: unconfirmed while a receiver may yet store it, dropped when every attempt
delivered nothing (a dead endpoint: the exporter is only waiting to retry)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager

import grpc
import pytest
import requests
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.metrics.export import MetricExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from urllib3.exceptions import MaxRetryError, NameResolutionError

from cafe_otel._config.metrics import resolve_metric_settings
from cafe_otel._config.settings import resolve_settings
from cafe_otel._export.account import EXPORTER_SPAN_EXPORTED, EXPORTER_SPAN_INFLIGHT, TelemetryAccount
from cafe_otel._export.attempts import (
    AttemptEnd,
    AttemptLog,
    Attempts,
    AttemptsWithdrawn,
    CountedStub,
    Delivery,
    InFlight,
    grpc_failure,
    http_answer,
    http_failure,
    watch_grpc_exporter,
    watch_http_session,
)
from cafe_otel._export.batch import BoundedBatchSpanProcessor
from cafe_otel._export.metrics_export import FailSoftMetricExporter
from cafe_otel._export.otlp import build_exporter
from tests.local_http import QuietHandler, serving

from .conftest import closed_port

SPANS = 3
WAIT = 10.0  # a bounded loop's ceiling; never a duration a test asserts


def _spans_through(processor: BoundedBatchSpanProcessor, count: int = SPANS) -> None:
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    for number in range(count):
        tracer.start_span(f"span {number}").end()


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true"
        time.sleep(0.01)


def _metric_exporter(environ: dict[str, str], attempts: AttemptLog | None = None) -> MetricExporter:
    settings = resolve_metric_settings(environ=environ)
    return build_exporter("metrics", settings.exporter, timeout=settings.export_timeout, attempts=attempts,
                          preferred_temporality=settings.preferred_temporality(),
                          preferred_aggregation=settings.preferred_aggregation())


def _points(account: TelemetryAccount) -> dict[tuple[str, str | None], int]:
    return {(p.name, p.error_type): p.value for p in account.points()}


# --- the verdict -------------------------------------------------------------------------------

REFUSED, UNKNOWN, OK = (AttemptEnd(Delivery.NOT_DELIVERED, "ConnectionError"),
                        AttemptEnd(Delivery.UNKNOWN, "ReadTimeout"), AttemptEnd(Delivery.DELIVERED, "200"))


@pytest.mark.parametrize(("ends", "outstanding", "verdict"), [
    ([], 0, InFlight.UNSENT),
    ([], 1, InFlight.UNCONFIRMED),  # sent, no answer yet
    ([REFUSED], 1, InFlight.UNCONFIRMED),  # a retry is out
    ([REFUSED], 0, InFlight.DROPPED),  # waiting to retry after a refusal
    ([REFUSED, REFUSED], 0, InFlight.DROPPED),
    ([UNKNOWN], 0, InFlight.UNCONFIRMED),
    ([UNKNOWN, REFUSED], 0, InFlight.UNCONFIRMED),  # the first may have been stored
    ([REFUSED, OK], 0, InFlight.DELIVERED),
    ([OK, REFUSED], 0, InFlight.UNCONFIRMED),  # part delivered
])
def test_the_verdict_follows_every_attempt(ends, outstanding, verdict):
    log = AttemptLog()
    log.start_export()
    for end in ends:
        log.begin()
        log.end(end)
    for _ in range(outstanding):
        log.begin()
    assert log.withdraw().in_flight() is verdict


def test_a_new_export_counts_its_attempts_from_zero():
    log = AttemptLog()
    log.start_export()
    log.begin()
    log.end(UNKNOWN)
    log.start_export()
    log.begin()
    log.end(REFUSED)
    assert log.snapshot() == Attempts(started=1, delivered=0, unknown=0, last=REFUSED)


def test_no_attempt_starts_after_the_log_is_withdrawn():
    log = AttemptLog()
    log.withdraw()
    with pytest.raises(AttemptsWithdrawn):
        log.begin()


# --- OTLP/HTTP attempts, at the session --------------------------------------------------------


class _Holding(QuietHandler):
    """Reads the request and holds it without an answer until released."""

    release = threading.Event()
    seen = 0

    def do_POST(self) -> None:
        self.read_body()
        type(self).seen += 1
        type(self).release.wait(WAIT)
        self.answer(200, b"", "application/x-protobuf")


class _Hanging(_Holding):
    release = threading.Event()
    seen = 0


class _Dropping(QuietHandler):
    """Reads the request and closes the connection without a word."""

    def do_POST(self) -> None:
        self.read_body()
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)


def _session(log: AttemptLog) -> requests.Session:
    session = requests.Session()
    watch_http_session(session, log)
    return session


def test_an_http_connection_refused_is_not_delivered():
    log = AttemptLog()
    with pytest.raises(requests.ConnectionError):
        _session(log).post(f"http://127.0.0.1:{closed_port()}/v1/traces", data=b"x", timeout=5)
    assert log.snapshot() == Attempts(started=1, last=AttemptEnd(Delivery.NOT_DELIVERED, "ConnectionError"))


def test_an_unresolvable_name_is_not_delivered():
    # As requests raises it: its ConnectionError around urllib3's MaxRetryError, whose reason
    # is the failed lookup (built here: a real lookup would depend on the machine's resolver).
    error = requests.ConnectionError(MaxRetryError(
        None, "/v1/traces", NameResolutionError("nohost.invalid", None, OSError())))  # type: ignore[arg-type]
    assert http_failure(error) == AttemptEnd(Delivery.NOT_DELIVERED, "ConnectionError")


def test_an_http_connection_dropped_after_the_request_is_unknown():
    log = AttemptLog()
    with serving(_Dropping) as port, pytest.raises(requests.ConnectionError):
        _session(log).post(f"http://127.0.0.1:{port}/v1/traces", data=b"x", timeout=5)
    assert log.snapshot().last == AttemptEnd(Delivery.UNKNOWN, "ConnectionError")


def test_an_http_read_timeout_is_unknown():
    log = AttemptLog()
    _Hanging.release.clear()
    with serving(_Hanging) as port:
        try:
            with pytest.raises(requests.ReadTimeout):
                _session(log).post(f"http://127.0.0.1:{port}/v1/traces", data=b"x", timeout=0.2)
        finally:
            _Hanging.release.set()
    assert log.snapshot().last == AttemptEnd(Delivery.UNKNOWN, "ReadTimeout")


@pytest.mark.parametrize(("status", "delivery"), [(200, Delivery.DELIVERED), (204, Delivery.DELIVERED),
                                                  (301, Delivery.NOT_DELIVERED), (400, Delivery.NOT_DELIVERED),
                                                  (503, Delivery.NOT_DELIVERED)])
def test_an_http_answer_is_delivered_only_when_2xx(status, delivery):
    assert http_answer(status) == AttemptEnd(delivery, str(status))


def test_a_withdrawn_session_sends_nothing():
    log = AttemptLog()
    _Holding.release.set()
    _Holding.seen = 0
    with serving(_Holding) as port:
        session = _session(log)
        session.post(f"http://127.0.0.1:{port}/v1/traces", data=b"x", timeout=5)
        log.withdraw()
        with pytest.raises(AttemptsWithdrawn):
            session.post(f"http://127.0.0.1:{port}/v1/traces", data=b"x", timeout=5)
    assert _Holding.seen == 1


# --- OTLP/gRPC attempts, at the stub -----------------------------------------------------------


class _Service(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.release = threading.Event()
        self.seen = threading.Event()

    def Export(self, request, context):
        self.seen.set()
        self.release.wait(WAIT)
        return trace_service_pb2.ExportTraceServiceResponse()


@contextmanager
def _grpc_receiver() -> Iterator[tuple[int, _Service, grpc.Server]]:
    service = _Service()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield port, service, server
    finally:
        service.release.set()
        server.stop(0)


def _stub(port: int, log: AttemptLog) -> tuple[CountedStub, grpc.Channel]:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    return CountedStub(trace_service_pb2_grpc.TraceServiceStub(channel), log), channel


def test_grpc_unavailable_with_no_connection_is_not_delivered():
    log = AttemptLog()
    stub, channel = _stub(closed_port(), log)
    with channel, pytest.raises(grpc.RpcError):
        stub.Export(trace_service_pb2.ExportTraceServiceRequest(), timeout=5)
    assert log.snapshot() == Attempts(started=1, last=AttemptEnd(Delivery.NOT_DELIVERED, "UNAVAILABLE"))


def test_grpc_deadline_exceeded_after_sending_is_unknown():
    log = AttemptLog()
    with _grpc_receiver() as (port, _service, _server):
        stub, channel = _stub(port, log)
        with channel, pytest.raises(grpc.RpcError):
            stub.Export(trace_service_pb2.ExportTraceServiceRequest(), timeout=0.3)
    assert log.snapshot().last == AttemptEnd(Delivery.UNKNOWN, "DEADLINE_EXCEEDED")


def test_grpc_unavailable_from_a_connection_lost_mid_call_is_unknown():
    log = AttemptLog()
    errors: list[BaseException] = []
    with _grpc_receiver() as (port, service, server):
        stub, channel = _stub(port, log)

        def call() -> None:
            try:
                stub.Export(trace_service_pb2.ExportTraceServiceRequest(), timeout=WAIT)
            except grpc.RpcError as error:
                errors.append(error)

        caller = threading.Thread(target=call)
        caller.start()
        assert service.seen.wait(WAIT)
        server.stop(0)  # the receiver goes away with the call in its hands
        caller.join(WAIT)
        channel.close()
    assert errors and errors[0].code() is grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
    assert log.snapshot().last == AttemptEnd(Delivery.UNKNOWN, "UNAVAILABLE")


@pytest.mark.parametrize("status", ["UNAUTHENTICATED", "PERMISSION_DENIED", "INVALID_ARGUMENT", "RESOURCE_EXHAUSTED"])
def test_a_grpc_receivers_refusal_is_not_delivered(status):
    # A status only an answer gives: the receiver did not take the request, so an export that
    # ends in it is lost, never unconfirmed.
    class Refusing(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request, context):
            context.abort(grpc.StatusCode[status], "refused")

    log = AttemptLog()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Refusing(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        stub, channel = _stub(port, log)
        with channel, pytest.raises(grpc.RpcError):
            stub.Export(trace_service_pb2.ExportTraceServiceRequest(), timeout=WAIT)
    finally:
        server.stop(0)
    assert log.snapshot().last == AttemptEnd(Delivery.NOT_DELIVERED, status)
    assert log.snapshot().in_flight() is InFlight.DROPPED


def test_a_grpc_failure_that_is_not_a_call_is_unknown():
    assert grpc_failure(RuntimeError("boom")) == AttemptEnd(Delivery.UNKNOWN, "RuntimeError")


@pytest.mark.parametrize("signal", ["traces", "metrics"])
def test_the_sdk_grpc_exporter_keeps_its_stub_where_the_counting_proxy_wraps_it(signal):
    # Pins the SDK's OTLPExporterMixin (1.45): the stub is `_client`, rebuilt by `_stub` when
    # the exporter reconnects after UNAVAILABLE. An SDK that moves either fails here, not by
    # reporting a dead endpoint's loss as unconfirmed.
    environ = {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TIMEOUT": "1500",
               "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{closed_port()}"}
    settings = resolve_settings(environ=environ)
    plain = (build_exporter("traces", settings.traces) if signal == "traces" else _metric_exporter(environ))
    assert not isinstance(plain._client, CountedStub)  # type: ignore[attr-defined]
    plain.shutdown()
    log = AttemptLog()
    exporter = (build_exporter("traces", settings.traces, attempts=log) if signal == "traces"
                else _metric_exporter(environ, log))
    assert log.attached and isinstance(exporter._client, CountedStub)  # type: ignore[attr-defined]
    # Two attempts within 1.5 s (at 0 and after a backoff of 0.8-1.2 s), the second on the
    # stub rebuilt after the first UNAVAILABLE: both counted.
    log.start_export()
    exporter.export([] if signal == "traces" else _one_point())  # type: ignore[arg-type]
    assert isinstance(exporter._client, CountedStub)  # type: ignore[attr-defined]
    assert log.snapshot() == Attempts(started=2, last=AttemptEnd(Delivery.NOT_DELIVERED, "UNAVAILABLE"))
    exporter.shutdown()


def test_an_exporter_of_another_shape_is_left_alone():
    log = AttemptLog()
    assert watch_grpc_exporter(object(), log) is False
    assert not log.attached


# --- the batch processor at shutdown's bound ---------------------------------------------------


def _otlp_batch(protocol: str, endpoint: str, account: TelemetryAccount) -> BoundedBatchSpanProcessor:
    settings = resolve_settings(endpoint=endpoint, protocol=protocol, export_timeout=10.0, environ={})
    log = AttemptLog()
    exporter = build_exporter("traces", settings.traces, attempts=log)
    return BoundedBatchSpanProcessor(exporter, account=account, export_timeout=10.0, schedule_delay=0.01,
                                     target=f"{protocol} {endpoint}", attempts=log)


@pytest.mark.parametrize(("protocol", "cause"), [("grpc", "UNAVAILABLE"), ("http/protobuf", "ConnectionError")])
def test_an_export_waiting_to_retry_a_dead_endpoint_at_the_bound_is_dropped(protocol, cause):
    account = TelemetryAccount()
    batch = _otlp_batch(protocol, f"http://127.0.0.1:{closed_port()}", account)
    _spans_through(batch)
    # The first attempt has been refused: the exporter is in its backoff (about 1 s) now.
    _until(lambda: batch._attempts is not None and batch._attempts.snapshot().last is not None)
    batch.shutdown(timeout=0.2)
    assert (account.exported, account.dropped, account.unconfirmed) == (0, SPANS, 0), account.summary()
    assert _points(account)[(EXPORTER_SPAN_EXPORTED, cause)] == SPANS
    summary = account.summary()
    assert f"{SPANS} dropped ({SPANS} export failed)" in summary
    assert "not delivered before exit" in summary and "waiting to retry" in summary


def test_an_http_export_held_by_its_receiver_at_the_bound_is_unconfirmed():
    account = TelemetryAccount()
    _Holding.release.clear()
    _Holding.seen = 0
    with serving(_Holding) as port:
        try:
            batch = _otlp_batch("http/protobuf", f"http://127.0.0.1:{port}", account)
            _spans_through(batch)
            _until(lambda: _Holding.seen == 1)
            batch.shutdown(timeout=0.2)
        finally:
            _Holding.release.set()
    assert (account.exported, account.dropped, account.unconfirmed) == (0, 0, SPANS), account.summary()
    assert _points(account)[(EXPORTER_SPAN_INFLIGHT, None)] == SPANS
    assert "had no answer yet" in account.summary()


def test_a_grpc_export_held_by_its_receiver_at_the_bound_is_unconfirmed():
    account = TelemetryAccount()
    with _grpc_receiver() as (port, service, _server):
        batch = _otlp_batch("grpc", f"http://127.0.0.1:{port}", account)
        _spans_through(batch)
        assert service.seen.wait(WAIT)
        batch.shutdown(timeout=0.2)
    assert (account.exported, account.dropped, account.unconfirmed) == (0, 0, SPANS), account.summary()
    assert "had no answer yet" in account.summary()


class _Scripted(SpanExporter):
    """Plays given attempt ends into a log, then holds the export until released."""

    def __init__(self, log: AttemptLog, ends: list[AttemptEnd], outstanding: bool = False) -> None:
        self.log, self.ends, self.outstanding = log, ends, outstanding
        self.holding, self.release = threading.Event(), threading.Event()

    def export(self, spans):
        for end in self.ends:
            self.log.begin()
            self.log.end(end)
        if self.outstanding:
            self.log.begin()
        self.holding.set()
        self.release.wait(WAIT)
        return SpanExportResult.SUCCESS

    def shutdown(self):
        self.release.set()


@pytest.mark.parametrize(("ends", "outstanding", "counts"), [
    ([OK], False, (SPANS, 0, 0)),  # answered, not yet returned: delivered
    ([], False, (0, SPANS, 0)),  # never reached the transport, and never will
    ([UNKNOWN, REFUSED], False, (0, 0, SPANS)),
    ([REFUSED], True, (0, 0, SPANS)),
])
def test_the_bound_settles_an_export_by_its_attempts(ends, outstanding, counts):
    log = AttemptLog()
    log.attach()
    exporter = _Scripted(log, ends, outstanding)
    account = TelemetryAccount()
    batch = BoundedBatchSpanProcessor(exporter, account=account, schedule_delay=0.01, attempts=log)
    _spans_through(batch)
    assert exporter.holding.wait(WAIT)
    batch.shutdown(timeout=0.1)
    assert (account.exported, account.dropped, account.unconfirmed) == counts, account.summary()


def test_an_unattached_log_knows_nothing_and_the_export_stays_unconfirmed():
    log = AttemptLog()  # no transport counts here
    exporter = _Scripted(log, [REFUSED])
    account = TelemetryAccount()
    batch = BoundedBatchSpanProcessor(exporter, account=account, schedule_delay=0.01, attempts=log)
    _spans_through(batch)
    assert exporter.holding.wait(WAIT)
    batch.shutdown(timeout=0.1)
    assert account.unconfirmed == SPANS and account.dropped == 0


# --- the metrics' final export at shutdown's deadline ------------------------------------------


def _one_point():
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    MeterProvider(metric_readers=[reader]).get_meter("test").create_counter("cafe.test").add(1)
    data = reader.get_metrics_data()
    assert data is not None
    return data


@pytest.mark.parametrize(("protocol", "cause"), [("grpc", "UNAVAILABLE"), ("http/protobuf", "ConnectionError")])
def test_a_final_metrics_export_waiting_to_retry_a_dead_endpoint_is_dropped(protocol, cause):
    environ = {"OTEL_EXPORTER_OTLP_PROTOCOL": protocol, "OTEL_EXPORTER_OTLP_TIMEOUT": "10000",
               "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{closed_port()}"}
    log = AttemptLog()
    inner = _metric_exporter(environ, log)
    account = TelemetryAccount()
    account.enable_metrics()
    exporter = FailSoftMetricExporter(inner, account=account, export_timeout=10.0, attempts=log)
    # The first attempt is refused at once; the deadline runs out in the backoff after it.
    exporter.close_by(time.monotonic() + 0.5)
    exporter.export(_one_point())
    inner.shutdown()
    snapshot = account.snapshot()
    assert log.snapshot().started >= 1
    assert (snapshot.metric_points_exported, snapshot.metric_points_unconfirmed) == (0, 0), account.summary()
    assert snapshot.metric_points_dropped_by_type == {cause: 1}, account.summary()
