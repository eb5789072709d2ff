"""A plain `openai` SDK program under cafe_otel's wire instrumentation, exported over OTLP to
the real Collector: Jaeger shows each call as one trace (the chat span its root, each HTTP
attempt its child), a retried call as one chat span over what the caller waited, and the
content event (`gen_ai.client.inference.operation.details`) reaches the Collector's logs
pipeline, through the spans' allowlist, into an OTLP/gRPC logs sink on 127.0.0.1.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import httpx2
import openai
import pytest
import yaml
from opentelemetry import trace
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind

from cafe_otel import BatchOptions, TelemetryHandle, configure
from cafe_otel import semconv as sc
from cafe_otel.instrumentation import OpenAIWireInstrumentor
from otelstack import COLLECTOR_CONFIG, LOOPBACK, Collector, Gateway, Jaeger, wait_for
from tests.wire.openai_server import OpenAIServer

pytestmark = pytest.mark.e2e

KEY = "sk-e2e-wire-0123456789abcdefghijklmn"
CANARY = "the order for table nine, oat milk"
MODEL = "wire-e2e"
# Each attempt answers after this long, so a chat span over both attempts is longer than two.
ATTEMPT_S = 0.3


class LogsSink(logs_service_pb2_grpc.LogsServiceServicer):
    """An OTLP/gRPC logs receiver on a port the kernel picked: keeps every request, raw and parsed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: list[logs_service_pb2.ExportLogsServiceRequest] = []
        self.raw = b""
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(self, self._server)
        self.port = self._server.add_insecure_port(f"{LOOPBACK}:0")

    def Export(self, request: Any, context: Any) -> logs_service_pb2.ExportLogsServiceResponse:
        with self._lock:
            self.requests.append(request)
            self.raw += request.SerializeToString()
        return logs_service_pb2.ExportLogsServiceResponse()

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def records(self) -> list[Any]:
        with self._lock:
            return [record for request in self.requests for resource in request.resource_logs
                    for scope in resource.scope_logs for record in scope.log_records]


@pytest.fixture
def logs_sink() -> Iterator[LogsSink]:
    sink = LogsSink()
    sink._server.start()
    try:
        yield sink
    finally:
        sink._server.stop(grace=None)


# Jaeger keeps a span's start and its duration in whole microseconds, each cut down from
# nanoseconds apart: spans that end at the same nanosecond may end 1 µs apart there.
ROUNDING_US = 1


def _end(span: dict[str, Any]) -> int:
    return int(span["startTime"]) + int(span["duration"])


def _collector(otelcol_bin: Path, tmp_path: Path, jaeger: Jaeger, procs: list, sink: LogsSink,
               overlays: tuple[Path, ...] = ()) -> Collector:
    proc = Collector.create(otelcol_bin, tmp_path, upstream=jaeger.otlp_grpc, queue_dir=tmp_path / "queue",
                            logs_upstream=sink.address, overlays=overlays)
    procs.append(proc)
    proc.start()
    return proc


class _HttpClientSpans(httpx2.BaseTransport):
    """An HTTP client's instrumentation, as the httpx one is: a CLIENT span per request, made
    current while it is sent, by the handle's TracerProvider."""

    def __init__(self, provider: TracerProvider) -> None:
        self.inner = httpx2.HTTPTransport()
        self.tracer = provider.get_tracer("opentelemetry.instrumentation.httpx")

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        with self.tracer.start_as_current_span(request.method, kind=SpanKind.CLIENT) as span:
            response = self.inner.handle_request(request)
            span.set_attribute(sc.HTTP_RESPONSE_STATUS_CODE, response.status_code)
            return response

    def close(self) -> None:
        self.inner.close()


def _instrumented(collector: Collector, service: str, capture: str) -> TelemetryHandle:
    return configure(service_name=service, endpoint=f"http://{collector.otlp_grpc}", protocol="grpc",
                     capture_content=capture, metrics=False, set_global=False, environ={},
                     batch=BatchOptions(export_timeout=10, schedule_delay=0.2))


def _run(handle: TelemetryHandle, calls: Any) -> None:
    """`calls()` under the wire instrumentation, then everything exported within a bound."""
    instrumentor = OpenAIWireInstrumentor()
    instrumentor.instrument(telemetry=handle)
    try:
        calls()
    finally:
        instrumentor.uninstrument()
        handle.shutdown(15.0)
    assert handle.account.dropped == 0, handle.account.summary()


def _tags(span: dict[str, Any]) -> dict[str, Any]:
    return {tag["key"]: tag["value"] for tag in span.get("tags", [])}


def _parent(span: dict[str, Any]) -> str | None:
    parents = [ref["spanID"] for ref in span.get("references", []) if ref["refType"] == "CHILD_OF"]
    assert len(parents) <= 1
    return parents[0] if parents else None


MESSAGES: Any = [{"role": "system", "content": f"Key {KEY} here."}, {"role": "user", "content": CANARY}]


def test_each_call_is_one_trace_in_jaeger_with_its_http_span_under_the_chat_span(
        otelcol_bin: Path, tmp_path: Path, jaeger: Jaeger, procs: list, logs_sink: LogsSink) -> None:
    collector = _collector(otelcol_bin, tmp_path, jaeger, procs, logs_sink)
    handle = _instrumented(collector, "wire-one-trace", "NO_CONTENT")
    assert handle.provider is not None
    transport = _HttpClientSpans(handle.provider)

    def calls() -> None:
        with OpenAIServer.running() as server:
            client = openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0,
                                   http_client=httpx2.Client(transport=transport))
            for _ in range(2):  # no span of the program's open: each call is a trace of its own
                client.chat.completions.create(model=MODEL, messages=MESSAGES)
            assert trace.get_current_span() is trace.INVALID_SPAN

    _run(handle, calls)
    jaeger.wait_for_spans("wire-one-trace", 4)
    traces, raw = jaeger.traces("wire-one-trace")
    assert len(traces) == 2, [[s["operationName"] for s in t["spans"]] for t in traces]
    for found in traces:
        by_name = {span["operationName"]: span for span in found["spans"]}
        assert sorted(by_name) == ["POST", f"chat {MODEL}"]
        chat, post = by_name[f"chat {MODEL}"], by_name["POST"]
        assert _parent(chat) is None  # the call's root
        assert _parent(post) == chat["spanID"] and post["traceID"] == chat["traceID"]
        assert chat["startTime"] <= post["startTime"]
        assert _end(post) <= _end(chat) + ROUNDING_US
        assert _tags(post)[sc.HTTP_RESPONSE_STATUS_CODE] == 200
    assert KEY not in raw and CANARY not in raw


@pytest.mark.parametrize("http_spans", [False, True], ids=["attempt-spans", "http-instrumentation"])
def test_a_retried_call_is_one_chat_span_in_jaeger_over_its_attempts(
        otelcol_bin: Path, tmp_path: Path, jaeger: Jaeger, procs: list, logs_sink: LogsSink,
        http_spans: bool) -> None:
    collector = _collector(otelcol_bin, tmp_path, jaeger, procs, logs_sink)
    service = f"wire-retried-{int(http_spans)}"
    handle = _instrumented(collector, service, "NO_CONTENT")
    assert handle.provider is not None
    waited: list[float] = []

    def calls() -> None:
        with OpenAIServer.running() as server:
            server.delay(ATTEMPT_S)
            server.fail_next(429, retryable=True)
            options: dict[str, Any] = {}
            if http_spans:
                options["http_client"] = httpx2.Client(transport=_HttpClientSpans(handle.provider))  # type: ignore[arg-type]
            client = openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=2, **options)
            started = time.monotonic()
            reply = client.chat.completions.create(model=MODEL, messages=MESSAGES)
            waited.append(time.monotonic() - started)
            assert reply.choices[0].message.content
            assert server.count == 2  # the 429, then the answer

    _run(handle, calls)
    jaeger.wait_for_spans(service, 3)
    traces, _raw = jaeger.traces(service)
    assert len(traces) == 1, [[s["operationName"] for s in t["spans"]] for t in traces]
    spans = traces[0]["spans"]
    (chat,) = [span for span in spans if span["operationName"] == f"chat {MODEL}"]
    attempts = sorted((span for span in spans if span is not chat), key=lambda span: span["startTime"])
    assert [span["operationName"] for span in attempts] == ["POST", "POST"]
    assert _parent(chat) is None
    assert all(_parent(span) == chat["spanID"] for span in attempts)
    assert [_tags(span)[sc.HTTP_RESPONSE_STATUS_CODE] for span in attempts] == [429, 200]
    if not http_spans:  # ours say which resend each is
        assert [_tags(span).get(sc.HTTP_REQUEST_RESEND_COUNT) for span in attempts] == [None, 1]
    # One operation, as long as the caller waited: from the first attempt's start to the
    # last one's end (Jaeger's times are microseconds).
    assert chat["startTime"] <= attempts[0]["startTime"]
    assert _end(attempts[-1]) <= _end(chat) + ROUNDING_US
    assert chat["duration"] >= 2 * ATTEMPT_S * 1e6
    assert chat["duration"] <= waited[0] * 1e6
    assert error_free(chat)


def error_free(span: dict[str, Any]) -> bool:
    tags = _tags(span)
    return sc.ERROR_TYPE not in tags and tags.get("otel.status_code") != "ERROR" and tags.get("error") is not True


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "kvlist_value":
        return {item.key: _value(item.value) for item in value.kvlist_value.values}
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


def _attributes(record: Any) -> dict[str, Any]:
    return {item.key: _value(item.value) for item in record.attributes}


def _event_records(sink: LogsSink) -> list[Any]:
    found = wait_for("the content event in the logs sink", sink.records, 30.0)
    time.sleep(1.0)  # a duplicate would arrive now
    assert isinstance(found, list)
    return sink.records()


def _content_allowed(tmp_path: Path) -> Path:
    """An overlay that lets the GenAI content keys through the allowlist (spans and logs alike):
    a deployment that chose to keep content."""
    allowed = yaml.safe_load(COLLECTOR_CONFIG.read_text())["processors"]["redaction"]["allowed_keys"]
    overlay = tmp_path / "content-allowed.yaml"
    overlay.write_text(yaml.safe_dump(
        {"processors": {"redaction": {"allowed_keys": [*allowed, *sorted(sc.CONTENT_ATTRIBUTES)]}}}))
    return overlay


@pytest.mark.parametrize("deployment", ["shipped", "content-allowed"])
def test_the_content_event_reaches_the_collectors_logs_pipeline_in_the_calls_trace(
        otelcol_bin: Path, tmp_path: Path, jaeger: Jaeger, procs: list, logs_sink: LogsSink,
        deployment: str) -> None:
    overlays = (_content_allowed(tmp_path),) if deployment == "content-allowed" else ()
    collector = _collector(otelcol_bin, tmp_path, jaeger, procs, logs_sink, overlays)
    service = f"wire-event-{deployment}"
    handle = _instrumented(collector, service, "EVENT_ONLY")

    def calls() -> None:
        with OpenAIServer.running() as server:
            openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0).chat.completions.create(
                model=MODEL, messages=MESSAGES)

    _run(handle, calls)
    (chat,) = jaeger.wait_for_spans(service, 1)
    (record,) = _event_records(logs_sink)
    assert record.event_name == sc.CONTENT_EVENT_NAME
    assert (record.trace_id.hex(), record.span_id.hex()) == (chat["traceID"], chat["spanID"])
    attributes = _attributes(record)
    assert attributes[sc.GEN_AI_OPERATION_NAME] == "chat" and attributes[sc.GEN_AI_REQUEST_MODEL] == MODEL
    assert KEY.encode() not in logs_sink.raw
    content = set(attributes) & sc.CONTENT_ATTRIBUTES
    if deployment == "shipped":  # the content keys are not on the shipped allowlist, as for spans
        assert content == set()
        assert CANARY.encode() not in logs_sink.raw
    else:
        assert content == {sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES}
        history = attributes[sc.GEN_AI_INPUT_MESSAGES]
        assert [message["role"] for message in history] == ["system", "user"]
        assert history[0]["parts"][0]["content"] == "Key [REDACTED] here."
        assert history[1]["parts"][0]["content"] == CANARY
        assert attributes[sc.GEN_AI_OUTPUT_MESSAGES][0]["role"] == "assistant"
    assert collector.metric("otelcol_receiver_accepted_log_records", data_type=None) == 1


@pytest.mark.parametrize("capture", ["NO_CONTENT", "SPAN_ONLY"])
def test_no_log_record_reaches_the_collector_when_capture_sends_nothing_to_the_event(
        otelcol_bin: Path, tmp_path: Path, jaeger: Jaeger, procs: list, logs_sink: LogsSink, capture: str) -> None:
    collector = _collector(otelcol_bin, tmp_path, jaeger, procs, logs_sink, (_content_allowed(tmp_path),))
    service = f"wire-no-event-{capture.lower()}"
    handle = _instrumented(collector, service, capture)

    def calls() -> None:
        with OpenAIServer.running() as server:
            openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0).chat.completions.create(
                model=MODEL, messages=MESSAGES)

    _run(handle, calls)
    (chat,) = jaeger.wait_for_spans(service, 1)
    # The span's content follows the capture (the overlay lets it through); no event at all.
    assert (sc.GEN_AI_INPUT_MESSAGES in _tags(chat)) is (capture == "SPAN_ONLY")
    assert handle.logger_provider is None
    # The handle's shutdown returned after every export it had was answered: any log record
    # it sent would be counted by the Collector's receiver by now.
    assert collector.metric("otelcol_receiver_accepted_log_records", data_type=None) == 0
    assert logs_sink.records() == []


def test_the_content_event_crosses_the_two_tiers_to_the_gateways_logs_backend(
        otelcol_bin: Path, tmp_path: Path, jaeger: Jaeger, procs: list, logs_sink: LogsSink) -> None:
    """An agent whose logs go to a gateway, and the gateway's to the sink: the record keeps its
    trace, and each tier's allowlist removes the content (neither lists it)."""
    gateway = Gateway.create(otelcol_bin, tmp_path, jaeger.otlp_grpc, "gateway-logs", sample_percent=100,
                             logs_upstream=logs_sink.address)
    procs.append(gateway)
    gateway.start()
    agent = Collector.create(otelcol_bin, tmp_path, upstream="unused:1", queue_dir=tmp_path / "agent-queue",
                             gateways=[gateway.otlp_grpc], logs_upstream=gateway.otlp_grpc)
    procs.append(agent)
    agent.start()
    handle = _instrumented(agent, "wire-event-tiers", "SPAN_AND_EVENT")

    def calls() -> None:
        with OpenAIServer.running() as server:
            openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0).chat.completions.create(
                model=MODEL, messages=MESSAGES)

    _run(handle, calls)
    (record,) = _event_records(logs_sink)
    assert record.event_name == sc.CONTENT_EVENT_NAME
    assert not set(_attributes(record)) & sc.CONTENT_ATTRIBUTES
    assert KEY.encode() not in logs_sink.raw and CANARY.encode() not in logs_sink.raw
    assert gateway.metric("otelcol_receiver_accepted_log_records", data_type=None) == 1
    (chat,) = jaeger.wait_for_spans("wire-event-tiers", 1, timeout=30.0)
    assert record.trace_id.hex() == chat["traceID"]
