"""OTLP partial success: a receiver that answers 2xx but reports items rejected. The account
counts those as lost (`error.type` `rejected`, as the conventions ask), never as delivered,
and never repeats the receiver's own message."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsPartialSuccess,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from cafe.counter import DEFAULT_SCRIPT, ScriptedClient, make_responder, record_shift, run_shift
from cafe_otel import configure
from cafe_otel._export.account import EXPORTER_METRIC_POINTS_EXPORTED, EXPORTER_SPAN_EXPORTED, REJECTED
from cafe_otel._export.batch import BoundedBatchSpanProcessor
from cafe_otel._export.partial_success import RejectionCounter
from tests.local_http import QuietHandler, serving

SERVER_TEXT = "REJECTION-CANARY: the receiver's own words"
SHIFT_SPANS = 14  # the built-in shift, its order rejected: agent, setup, 4 turns, 4 chats, 3 tools, wrapup

Answer = Callable[[str, bytes], tuple[bytes, str]]  # (path, request body) -> (body, content type)


@contextmanager
def receiver(answer: Answer) -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    """An OTLP/HTTP receiver on 127.0.0.1 answering 200 with what `answer` makes; yields its
    endpoint and the requests it received."""
    received: list[tuple[str, bytes]] = []

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            body = self.read_body()
            received.append((self.path, body))
            self.answer(200, *answer(self.path, body))

    with serving(Handler) as port:
        yield f"http://127.0.0.1:{port}", received


def _rejecting(spans: int = 0, points: int = 0) -> Answer:
    def answer(path: str, body: bytes) -> tuple[bytes, str]:
        if path.endswith("/v1/traces"):
            reply: Any = ExportTraceServiceResponse(partial_success=ExportTracePartialSuccess(
                rejected_spans=spans, error_message=SERVER_TEXT))
        else:
            reply = ExportMetricsServiceResponse(partial_success=ExportMetricsPartialSuccess(
                rejected_data_points=points, error_message=SERVER_TEXT))
        return reply.SerializeToString(), "application/x-protobuf"
    return answer


def _shift_through(endpoint: str, *, metrics: bool = False, protocol: str = "http/protobuf") -> Any:
    handle = configure(service_name="cafe-test", endpoint=endpoint, protocol=protocol,
                       metrics=metrics, environ={})
    run_shift(ScriptedClient(), list(DEFAULT_SCRIPT), make_responder([]),
                   tracer=handle.tracer())
    handle.shutdown(2.0)
    return handle


def _points(handle: Any) -> dict[tuple[str, str | None], int]:
    return {(p.name, p.error_type): p.value for p in handle.account.points()}


def test_spans_a_receiver_rejects_in_a_200_are_counted_as_lost_not_delivered():
    with receiver(_rejecting(spans=4)) as (endpoint, received):
        handle = _shift_through(endpoint)
    spans = sum(len(scope.spans) for path, body in received if path == "/v1/traces"
                for resource in ExportTraceServiceRequest.FromString(body).resource_spans
                for scope in resource.scope_spans)
    assert spans == SHIFT_SPANS  # one batch: the receiver was sent every span, and rejected 4
    snapshot = handle.account.snapshot()
    assert (snapshot.exported, snapshot.dropped) == (SHIFT_SPANS - 4, 4)
    assert _points(handle)[(EXPORTER_SPAN_EXPORTED, REJECTED)] == 4
    summary = handle.account.summary()
    assert "4 rejected by the receiver" in summary and "partial success" in summary
    assert SERVER_TEXT not in summary and "CANARY" not in repr(handle.account.snapshot())


def test_metric_points_a_receiver_rejects_are_counted_as_lost():
    with receiver(_rejecting(points=2)) as (endpoint, _):
        handle = _shift_through(endpoint, metrics=True)
    snapshot = handle.account.snapshot()
    assert snapshot.metric_points_dropped_by_type == {REJECTED: 2}
    assert snapshot.metric_points_exported > 0
    assert _points(handle)[(EXPORTER_METRIC_POINTS_EXPORTED, REJECTED)] == 2
    assert snapshot.exported == SHIFT_SPANS  # the spans' answers rejected none


def test_an_answer_that_is_not_an_otlp_response_delivers_and_is_noted():
    with receiver(lambda path, body: (b"\xff<html>not protobuf", "application/x-protobuf")) as (endpoint, _):
        handle = _shift_through(endpoint)
    assert (handle.account.exported, handle.account.dropped) == (SHIFT_SPANS, 0)
    assert "not an OTLP response" in (handle.account.last_note or "")


def test_a_full_success_answer_counts_everything_delivered():
    with receiver(_rejecting()) as (endpoint, _):
        handle = _shift_through(endpoint)
    assert (handle.account.exported, handle.account.dropped, handle.account.last_note) == (SHIFT_SPANS, 0, None)
    assert handle.account.summary() == f"{SHIFT_SPANS} spans exported, 0 dropped"


@pytest.mark.parametrize(("body", "content_type", "expected"), [
    (b'{"partialSuccess": {"rejectedSpans": "3", "errorMessage": "x"}}', "application/json", 3),
    (b'{"partialSuccess": {"rejectedSpans": 2}}', "application/json; charset=utf-8", 2),
    (b'{}', "application/json", 0),
    (b'{"partialSuccess": {}}', "application/json", 0),
    (b'{"partialSuccess": {"rejectedSpans": "-1"}}', "application/json", None),
    (b'{"partialSuccess": {"rejectedSpans": "\xc2\xb2"}}', "application/json", None),
    (b'{"partialSuccess": {"rejectedSpans": true}}', "application/json", None),
    (b'[1]', "application/json", None),
    (b"{", "application/json", None),
    (b"", "application/x-protobuf", 0),
    (b"\x08" * (64 * 1024 + 1), "application/x-protobuf", None),
])
def test_what_an_answer_body_is_read_as(body: bytes, content_type: str, expected: int | None):
    assert RejectionCounter("traces").rejected_in(body, content_type) == expected


class _Succeeds(SpanExporter):
    def export(self, spans: Any) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def test_a_receiver_cannot_reject_more_than_it_was_sent_nor_carry_rejections_to_the_next_batch(tracer_provider):
    counter = RejectionCounter("traces")
    counter.add(1_000)  # an answer that came too late for its batch
    processor = BoundedBatchSpanProcessor(_Succeeds(), max_export_batch_size=3, schedule_delay=0.01,
                                          rejected=lambda: counter.take() + 5)
    provider = tracer_provider(processor)
    for n in range(6):
        provider.get_tracer("t").start_span(f"s{n}").end()
    processor.shutdown(2.0)
    snapshot = processor.account.snapshot()
    # Each batch of 3 reports 5 rejected: 3 counted, none carried over, none delivered.
    assert (snapshot.exported, snapshot.export_failed_by_type) == (0, {REJECTED: 6})


def test_a_rejected_count_that_fails_costs_its_count_not_the_worker(tracer_provider):
    def broken() -> int:
        raise RuntimeError(SERVER_TEXT)
    processor = BoundedBatchSpanProcessor(_Succeeds(), max_export_batch_size=2, schedule_delay=0.01,
                                          rejected=broken)
    provider = tracer_provider(processor)
    for n in range(5):
        provider.get_tracer("t").start_span(f"s{n}").end()
    processor.shutdown(2.0)
    assert (processor.account.exported, processor.account.dropped) == (5, 0)
    assert "RuntimeError" in (processor.account.last_note or "")
    assert SERVER_TEXT not in (processor.account.last_note or "")


@pytest.fixture
def tracer_provider() -> Iterator[Callable[[Any], Any]]:
    from opentelemetry.sdk.trace import TracerProvider

    made: list[TracerProvider] = []

    def make(processor: Any) -> TracerProvider:
        provider = TracerProvider()
        provider.add_span_processor(processor)
        made.append(provider)
        return provider

    yield make
    for provider in made:
        provider.shutdown()


# --- over OTLP/gRPC: the same answer, read from the stub ----------------------------------------

@contextmanager
def grpc_receiver(*, spans: int | None = None, points: int | None = None) -> Iterator[tuple[str, list[int]]]:
    """An OTLP/gRPC receiver on 127.0.0.1 that takes every request and answers a partial
    success rejecting `spans` of each traces request and `points` of each metrics request
    (None: all it was sent); yields its endpoint and how many items it was sent."""
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    sent: list[int] = []

    class Traces(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: Any, context: Any) -> ExportTraceServiceResponse:
            count = sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)
            sent.append(count)
            return ExportTraceServiceResponse(partial_success=ExportTracePartialSuccess(
                rejected_spans=count if spans is None else spans, error_message=SERVER_TEXT))

    class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
        def Export(self, request: Any, context: Any) -> ExportMetricsServiceResponse:
            count = sum(len(getattr(metric, metric.WhichOneof("data")).data_points)
                        for resource in request.resource_metrics for scope in resource.scope_metrics
                        for metric in scope.metrics)
            return ExportMetricsServiceResponse(partial_success=ExportMetricsPartialSuccess(
                rejected_data_points=count if points is None else points, error_message=SERVER_TEXT))

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"http://127.0.0.1:{port}", sent
    finally:
        server.stop(0)


def test_spans_and_points_a_grpc_receiver_rejects_are_counted_as_lost():
    with grpc_receiver() as (endpoint, sent):
        handle = _shift_through(endpoint, metrics=True, protocol="grpc")
    assert sum(sent) == SHIFT_SPANS  # every span reached the receiver, which rejected them all
    snapshot = handle.account.snapshot()
    assert (snapshot.exported, snapshot.dropped) == (0, SHIFT_SPANS)
    assert snapshot.metric_points_exported == 0 and snapshot.metric_points_dropped_by_type[REJECTED] > 0
    points = _points(handle)
    assert points[(EXPORTER_SPAN_EXPORTED, REJECTED)] == SHIFT_SPANS
    assert (EXPORTER_METRIC_POINTS_EXPORTED, REJECTED) in points
    summary = handle.account.summary()
    assert f"{SHIFT_SPANS} rejected by the receiver" in summary and SERVER_TEXT not in summary


def test_a_grpc_receiver_rejecting_some_spans_loses_those_only():
    with grpc_receiver(spans=3) as (endpoint, _):
        handle = _shift_through(endpoint, protocol="grpc")
    assert (handle.account.exported, handle.account.dropped) == (SHIFT_SPANS - 3, 3)


def test_a_grpc_receiver_rejecting_none_delivers_everything():
    with grpc_receiver(spans=0, points=0) as (endpoint, _):
        handle = _shift_through(endpoint, metrics=True, protocol="grpc")
    snapshot = handle.account.snapshot()
    assert (snapshot.exported, snapshot.dropped, snapshot.metric_points_dropped_by_type) == (SHIFT_SPANS, 0, {})


def _recorded(tmp_path: Any) -> str:
    from .conftest import SEED_DECISIONS

    path = tmp_path / "shift.jsonl"
    record_shift(ScriptedClient(), DEFAULT_SCRIPT, path, responder=make_responder(SEED_DECISIONS))
    return str(path)


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_cafe_export_fails_when_the_receiver_rejects_every_span(tmp_path, protocol):
    import io

    from cafe.cli import main
    from cafe_otel._cli.plugin import TelemetryExportFailed, plugin

    def export(endpoint: str) -> tuple[int, str]:
        out, err = io.StringIO(), io.StringIO()
        code = main(["export", _recorded(tmp_path), "--otlp-protocol", protocol, "--otlp", endpoint],
                    environ={}, out=out, err=err, load_plugins=lambda warn: [plugin])
        return code, err.getvalue()

    if protocol == "grpc":
        with grpc_receiver() as (endpoint, _):
            code, err = export(endpoint)
    else:
        with receiver(_rejecting(spans=10_000)) as (endpoint, _):
            code, err = export(endpoint)
    assert code == TelemetryExportFailed.exit_code, err
    assert "telemetry: 0 spans exported, 17 dropped" in err and "17 rejected by the receiver" in err
    assert err.count("\n") == 1 and SERVER_TEXT not in err
