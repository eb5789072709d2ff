"""The `openai` SDK instrumentor on the wire seam: one chat span and the GenAI client metrics
per call, sync, async and streamed, however the call ends; metadata only."""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from opentelemetry import trace
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import cafe.wire as wire
from cafe_otel import AdvancedOptions, MetricsOptions, configure, encode, invoke_agent
from cafe_otel import semconv as sc
from cafe_otel._configure import TelemetryHandle
from cafe_otel._metrics.listener import DURATION_BUCKETS
from cafe_otel._wire import builder as builder_module
from cafe_otel.instrumentation import OpenAIWireInstrumentor
from tests.wire.libraries import SDK_HTTP as http
from tests.wire.libraries import SDK_LIBRARY
from tests.wire.openai_server import OpenAIServer

KEY = "sk-test-instrumented-5b9e0c1d2f3a4b5c"
SECRET_TEXT = "my card number is 4111 1111 1111 1111"
MESSAGES = [{"role": "system", "content": "You are a barista."}, {"role": "user", "content": SECRET_TEXT}]


class KeptMetrics(MetricExporter):
    def __init__(self) -> None:
        super().__init__()
        self.data: list[Any] = []

    def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        self.data.append(metrics_data)
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None

    def points(self, name: str) -> list[Any]:
        found = []
        for data in self.data[-1:]:  # cumulative: the last export holds everything
            for resource in data.resource_metrics:
                for scope in resource.scope_metrics:
                    for metric in scope.metrics:
                        if metric.name == name:
                            found.extend(metric.data.data_points)
        return found

    def unit(self, name: str) -> str | None:
        for resource in self.data[-1].resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        return str(metric.unit)
        return None


class Pipeline:
    def __init__(self, **options: Any) -> None:
        self.spans = InMemorySpanExporter()
        self.metrics = KeptMetrics()
        self.handle: TelemetryHandle = configure(exporter=self.spans, environ={}, set_global=False, **options,
                                                 metrics=MetricsOptions(exporter=self.metrics))
        self.instrumentor = OpenAIWireInstrumentor()

    def __enter__(self) -> Pipeline:
        self.instrumentor.instrument(telemetry=self.handle)
        return self

    def __exit__(self, *exc: object) -> None:
        self.instrumentor.uninstrument()
        self.handle.shutdown(2.0)

    def finished(self) -> list[ReadableSpan]:
        self.handle.force_flush(2.0)
        return list(self.spans.get_finished_spans())


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer.running() as running:
        yield running


def _client(server: OpenAIServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0)


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_a_plain_call_is_one_client_span_with_the_request_and_the_answer(server: OpenAIServer) -> None:
    with Pipeline() as pipeline:
        _client(server).chat.completions.create(
            model="gpt-test", messages=MESSAGES, max_tokens=5, temperature=0.5, top_p=0.9,  # type: ignore[arg-type]
            frequency_penalty=0.1, presence_penalty=-0.2, stop=["###"], seed=7, n=2,
            response_format={"type": "json_object"})
        (span,) = pipeline.finished()
    assert span.name == "chat gpt-test" and span.kind is SpanKind.CLIENT
    assert span.instrumentation_scope is not None and span.instrumentation_scope.schema_url == sc.SCHEMA_URL
    attributes = _attrs(span)
    assert attributes[sc.GEN_AI_OPERATION_NAME] == "chat"
    assert attributes[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert attributes[sc.GEN_AI_REQUEST_MODEL] == "gpt-test"
    assert attributes[sc.GEN_AI_REQUEST_MAX_TOKENS] == 5
    assert attributes[sc.GEN_AI_REQUEST_TEMPERATURE] == 0.5
    assert attributes[sc.GEN_AI_REQUEST_TOP_P] == 0.9
    assert attributes[sc.GEN_AI_REQUEST_FREQUENCY_PENALTY] == 0.1
    assert attributes[sc.GEN_AI_REQUEST_PRESENCE_PENALTY] == -0.2
    assert attributes[sc.GEN_AI_REQUEST_STOP_SEQUENCES] == ("###",)
    assert attributes[sc.GEN_AI_REQUEST_SEED] == 7
    assert attributes[sc.GEN_AI_REQUEST_CHOICE_COUNT] == 2
    assert attributes[sc.GEN_AI_OUTPUT_TYPE] == "json"
    assert sc.GEN_AI_REQUEST_STREAM not in attributes  # set if and only if the request streams
    assert attributes[sc.GEN_AI_RESPONSE_MODEL] == "gpt-test"
    assert attributes[sc.GEN_AI_RESPONSE_ID].startswith("chatcmpl-")
    assert attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 11
    assert attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 5
    assert attributes[sc.SERVER_ADDRESS] == "127.0.0.1" and attributes[sc.SERVER_PORT] == server.port
    assert sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK not in attributes
    assert not any(key.startswith("cafe.") for key in attributes)  # café attributes on café spans only
    assert span.status.status_code is StatusCode.UNSET


def test_the_call_records_the_client_metrics_with_the_spec_buckets(server: OpenAIServer) -> None:
    with Pipeline() as pipeline:
        _client(server).chat.completions.create(model="gpt-test", messages=MESSAGES, max_tokens=3)  # type: ignore[arg-type]
    metrics = pipeline.metrics
    (duration,) = metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_DURATION)
    assert tuple(duration.explicit_bounds) == DURATION_BUCKETS and duration.count == 1
    assert dict(duration.attributes)[sc.GEN_AI_REQUEST_MODEL] == "gpt-test"
    assert sc.ERROR_TYPE not in dict(duration.attributes)
    tokens = {dict(p.attributes)[sc.GEN_AI_TOKEN_TYPE]: p.sum
              for p in metrics.points(sc.METRIC_GEN_AI_CLIENT_TOKEN_USAGE)}
    assert tokens == {"input": 11, "output": 3}
    # Not a streamed call: the chunk metrics are not reported (the spec: SHOULD NOT).
    assert metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK) == []
    assert metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_PER_OUTPUT_CHUNK) == []


@pytest.mark.parametrize("stream", [False, True])
def test_the_token_and_duration_points_carry_the_answers_service_tier_and_fingerprint(
        server: OpenAIServer, stream: bool) -> None:
    server.answer_head(service_tier="default", system_fingerprint="fp_44709d6fcb")
    with Pipeline() as pipeline:
        answer = _client(server).chat.completions.create(
            model="gpt-test", messages=MESSAGES, stream=stream,  # type: ignore[arg-type]
            **({"stream_options": {"include_usage": True}} if stream else {}))
        for _ in answer if stream else ():  # type: ignore[union-attr]
            pass
        pipeline.finished()
    metrics = pipeline.metrics
    points = [*metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_DURATION),
              *metrics.points(sc.METRIC_GEN_AI_CLIENT_TOKEN_USAGE)]
    assert len(points) == 3
    for point in points:
        attributes = dict(point.attributes)
        assert attributes[sc.OPENAI_RESPONSE_SERVICE_TIER] == "default"
        assert attributes[sc.OPENAI_RESPONSE_SYSTEM_FINGERPRINT] == "fp_44709d6fcb"
    # openai.md adds them to those two metrics only.
    for point in metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK):
        assert sc.OPENAI_RESPONSE_SERVICE_TIER not in dict(point.attributes)
    assert bool(metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK)) is stream


def test_a_stream_is_marked_timed_to_its_first_chunk_and_its_chunks_recorded(server: OpenAIServer) -> None:
    with Pipeline() as pipeline:
        stream = _client(server).chat.completions.create(
            model="gpt-test", messages=MESSAGES, stream=True, stream_options={"include_usage": True})  # type: ignore[arg-type]
        chunks = list(stream)
        (span,) = pipeline.finished()
    attributes = _attrs(span)
    assert attributes[sc.GEN_AI_REQUEST_STREAM] is True
    first = attributes[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]
    assert isinstance(first, float) and 0 <= first <= (span.end_time - span.start_time) / 1e9  # type: ignore[operator]
    assert attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 11
    assert attributes[sc.GEN_AI_RESPONSE_ID] == chunks[0].id
    metrics = pipeline.metrics
    (first_chunk,) = metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK)
    (per_chunk,) = metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_PER_OUTPUT_CHUNK)
    assert first_chunk.count == 1 and tuple(first_chunk.explicit_bounds) == DURATION_BUCKETS
    assert per_chunk.count == len(chunks) - 1 and tuple(per_chunk.explicit_bounds) == DURATION_BUCKETS
    assert metrics.unit(sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK) == "s"
    assert metrics.unit(sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_PER_OUTPUT_CHUNK) == "s"


@pytest.mark.parametrize("how", ["closed", "collected"])
def test_a_stream_left_early_still_ends_its_span(server: OpenAIServer, how: str) -> None:
    with Pipeline() as pipeline:
        stream = _client(server).chat.completions.create(model="gpt-test", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
        next(iter(stream))
        if how == "closed":
            stream.close()
        else:
            del stream
            for _ in range(3):
                gc.collect()
        (span,) = pipeline.finished()
    attributes = _attrs(span)
    assert span.end_time is not None and attributes[sc.GEN_AI_REQUEST_STREAM] is True
    assert sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK in attributes
    assert span.status.status_code is StatusCode.UNSET  # leaving a stream is the caller's choice


def test_async_calls_plain_and_streamed_each_get_their_span(server: OpenAIServer) -> None:
    async def calls() -> None:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key=KEY, max_retries=0)
        await asyncio.gather(*(client.chat.completions.create(model=f"m{n}", messages=MESSAGES)  # type: ignore[arg-type]
                               for n in range(2)))
        stream = await client.chat.completions.create(model="s", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
        async for _chunk in stream:
            pass
        await client.close()

    with Pipeline() as pipeline:
        asyncio.run(calls())
        spans = {span.name: _attrs(span) for span in pipeline.finished()}
    assert set(spans) == {"chat m0", "chat m1", "chat s"}
    assert spans["chat s"][sc.GEN_AI_REQUEST_STREAM] is True
    assert sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK in spans["chat s"]
    assert all(spans[name][sc.GEN_AI_USAGE_INPUT_TOKENS] == 11 for name in ("chat m0", "chat m1"))


@pytest.mark.parametrize(("status", "error"), [(429, openai.RateLimitError), (500, openai.InternalServerError)])
def test_an_error_answer_is_named_by_its_status_on_span_and_metric(server: OpenAIServer, status: int,
                                                                    error: type[Exception]) -> None:
    server.fail_next(status)
    with Pipeline() as pipeline:
        with pytest.raises(error):
            _client(server).chat.completions.create(model="gpt-test", messages=MESSAGES)  # type: ignore[arg-type]
        (span,) = pipeline.finished()
    assert _attrs(span)[sc.ERROR_TYPE] == str(status)
    assert span.status.status_code is StatusCode.ERROR and not span.status.description
    (duration,) = pipeline.metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_DURATION)
    assert dict(duration.attributes)[sc.ERROR_TYPE] == str(status)


def test_a_timeout_is_its_own_error_type_with_a_qualified_exception_type(server: OpenAIServer) -> None:
    server.delay(3.0)  # far past the timeout, so a busy machine still times out reading
    with Pipeline() as pipeline:
        client = openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=0.5)
        with pytest.raises(openai.APITimeoutError):
            client.chat.completions.create(model="gpt-test", messages=MESSAGES)  # type: ignore[arg-type]
        (span,) = pipeline.finished()
    assert _attrs(span)[sc.ERROR_TYPE] == f"{SDK_LIBRARY}.ReadTimeout"  # the class its SDK's library exports
    (event,) = span.events
    assert event.name == "exception"
    assert dict(event.attributes or {}) == {sc.EXCEPTION_TYPE: f"{SDK_LIBRARY}.ReadTimeout"}


def test_no_customer_text_and_no_key_in_any_exported_byte(server: OpenAIServer) -> None:
    with Pipeline() as pipeline:
        client = _client(server)
        client.chat.completions.create(model="gpt-test", messages=MESSAGES)  # type: ignore[arg-type]
        for _chunk in client.chat.completions.create(model="gpt-test", messages=MESSAGES, stream=True):  # type: ignore[arg-type]
            pass
        spans = pipeline.finished()
    exported = encode(spans)
    assert len(spans) == 2
    for text in (KEY, SECRET_TEXT, "barista", "latte"):
        assert text.encode() not in exported


def test_content_capture_puts_the_chat_history_system_prompt_included_on_the_span(server: OpenAIServer) -> None:
    import json

    with Pipeline(capture_content=True) as pipeline:
        for _chunk in _client(server).chat.completions.create(model="gpt-test", messages=MESSAGES, stream=True):  # type: ignore[arg-type]
            pass
        (span,) = pipeline.finished()
    attributes = _attrs(span)
    history = json.loads(attributes[sc.GEN_AI_INPUT_MESSAGES])
    assert [message["role"] for message in history] == ["system", "user"]
    assert history[0]["parts"] == [{"type": "text", "content": "You are a barista."}]
    (answer,) = json.loads(attributes[sc.GEN_AI_OUTPUT_MESSAGES])
    assert answer["role"] == "assistant" and answer["finish_reason"] == "stop"
    assert answer["parts"][0]["content"].startswith("Sure one latte")
    assert KEY not in json.dumps(attributes)


def test_the_observer_never_fails_the_call_and_counts_what_it_failed_at(server: OpenAIServer) -> None:
    class Broken:
        def start_span(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("tracer down")

    with Pipeline() as pipeline:
        observer = pipeline.handle.wire_observer()
        assert observer is not None
        observer.tracer = Broken()  # type: ignore[assignment]
        with wire.intercept([observer]):
            reply = _client(server).chat.completions.create(model="gpt-test", messages=MESSAGES)  # type: ignore[arg-type]
    assert reply.choices[0].message.content
    assert pipeline.handle.account.snapshot().listener_errors >= 1


def test_recording_and_telemetry_stack_on_one_interception(server: OpenAIServer) -> None:
    heard: list[str] = []

    class Probe:
        def start(self, request: wire.WireRequest) -> None:
            heard.append(request.path)

    with Pipeline() as pipeline, wire.intercept([Probe()]):
        assert len(wire.installed()) == 2
        _client(server).chat.completions.create(model="gpt-test", messages=MESSAGES)  # type: ignore[arg-type]
        (span,) = pipeline.finished()
    assert heard == ["/v1/chat/completions"] and span.name == "chat gpt-test"
    assert wire.installed() == ()


def test_other_requests_are_not_chat_spans(server: OpenAIServer) -> None:
    with Pipeline() as pipeline:
        with pytest.raises(openai.APIStatusError):  # the test server has no GET routes
            _client(server).models.list()
        assert pipeline.finished() == []


# --- where the spans are built -------------------------------------------------------------
class _Threads(SpanProcessor):
    """Notes the thread each span ended on."""

    def __init__(self) -> None:
        self.ended: list[tuple[str, str]] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append((span.name, threading.current_thread().name))


def _no_builder_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The builder's thread never starts: what it would build is built only by a drain."""
    monkeypatch.setattr(builder_module.CallBuilder, "_start", lambda self: None)


def test_under_another_provider_the_span_is_there_when_the_call_returns(server: OpenAIServer) -> None:
    spans = InMemorySpanExporter()
    threads = _Threads()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(threads)
    provider.add_span_processor(SimpleSpanProcessor(spans))
    instrumentor = OpenAIWireInstrumentor()
    instrumentor.instrument(tracer_provider=provider, meter_provider=NoOpMeterProvider())
    try:
        _client(server).chat.completions.create(model="gpt-test", messages=MESSAGES)  # type: ignore[arg-type]
        (span,) = spans.get_finished_spans()  # no flush: built and ended before the call returned
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    assert span.name == "chat gpt-test" and _attrs(span)[sc.GEN_AI_USAGE_INPUT_TOKENS] == 11
    assert threads.ended == [("chat gpt-test", threading.current_thread().name)]


def test_under_our_pipeline_each_call_is_built_once_on_the_builder_thread(server: OpenAIServer) -> None:
    threads = _Threads()
    with Pipeline(advanced=AdvancedOptions(extra_processors=(threads,))) as pipeline:
        client = _client(server)
        for number in range(3):
            client.chat.completions.create(model=f"m{number}", messages=MESSAGES)  # type: ignore[arg-type]
            for _chunk in client.chat.completions.create(model=f"s{number}", messages=MESSAGES,  # type: ignore[arg-type]
                                                         stream=True):
                pass
        names = sorted(span.name for span in pipeline.finished())
        pipeline.handle.force_flush(2.0)  # a second drain builds nothing again
        assert sorted(span.name for span in pipeline.spans.get_finished_spans()) == names
    assert names == sorted([f"chat m{n}" for n in range(3)] + [f"chat s{n}" for n in range(3)])
    assert {thread for _, thread in threads.ended} == {"cafe-otel-call-builder"}
    (duration,) = {tuple(p.attributes.items()): p for p in pipeline.metrics.points(
        sc.METRIC_GEN_AI_CLIENT_OPERATION_DURATION) if dict(p.attributes)[sc.GEN_AI_REQUEST_MODEL] == "m0"}.values()
    assert duration.count == 1
    assert sum(p.count for p in pipeline.metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_DURATION)) == 6


def test_force_flush_and_shutdown_drain_the_builder_first(server: OpenAIServer,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _no_builder_thread(monkeypatch)
    with Pipeline() as pipeline:
        _client(server).chat.completions.create(model="flushed", messages=MESSAGES)  # type: ignore[arg-type]
        assert [span.name for span in pipeline.finished()] == ["chat flushed"]
        _client(server).chat.completions.create(model="at-shutdown", messages=MESSAGES)  # type: ignore[arg-type]
    assert [span.name for span in pipeline.spans.get_finished_spans()] == ["chat flushed", "chat at-shutdown"]
    assert sum(p.count for p in pipeline.metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_DURATION)) == 2
    assert pipeline.handle.account.dropped == 0


def test_every_metrics_collection_drains_the_builder_first(server: OpenAIServer,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    _no_builder_thread(monkeypatch)
    with Pipeline() as pipeline:
        _client(server).chat.completions.create(model="gpt-test", messages=MESSAGES, max_tokens=3)  # type: ignore[arg-type]
        meters = pipeline.handle.meter_provider
        assert meters is not None
        meters.force_flush()  # the reader's collection, not the handle's flush
        (duration,) = pipeline.metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_DURATION)
        assert duration.count == 1


def test_a_call_under_an_agent_span_adds_its_totals_before_the_agent_span_ends(
        server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_builder_thread(monkeypatch)  # a call handed to the builder would miss the agent span's end
    with Pipeline() as pipeline:
        with invoke_agent("support_bot", tracer_provider=pipeline.handle.provider):
            _client(server).chat.completions.create(model="gpt-test", messages=MESSAGES, max_tokens=3)  # type: ignore[arg-type]
        spans = {span.name: span for span in pipeline.finished()}
    assert set(spans) == {"invoke_agent support_bot", "chat gpt-test"}
    agent = _attrs(spans["invoke_agent support_bot"])
    assert (agent[sc.GEN_AI_USAGE_INPUT_TOKENS], agent[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (11, 3)


def test_an_agent_span_adds_up_the_calls_under_it_whatever_their_api(
        server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.wire.responses_server import ResponsesServer

    _no_builder_thread(monkeypatch)
    with Pipeline() as pipeline, ResponsesServer.running() as responses:
        with invoke_agent("support_bot", tracer_provider=pipeline.handle.provider):
            _client(server).chat.completions.create(model="gpt-test", messages=MESSAGES, max_tokens=3)  # type: ignore[arg-type]
            client = openai.OpenAI(base_url=responses.base_url, api_key=KEY, max_retries=0)
            client.responses.create(model="gpt-4.1", input=SECRET_TEXT)
            with client.responses.stream(model="gpt-4.1", input="And a croissant.") as stream:
                stream.get_final_response()
        spans = pipeline.finished()
    (agent,) = [_attrs(span) for span in spans if span.name == "invoke_agent support_bot"]
    calls = [_attrs(span) for span in spans if span.name.startswith("chat ")]
    assert sorted(call[sc.OPENAI_API_TYPE] for call in calls) == ["chat_completions", "responses", "responses"]
    assert agent[sc.GEN_AI_USAGE_INPUT_TOKENS] == sum(call[sc.GEN_AI_USAGE_INPUT_TOKENS] for call in calls)
    assert agent[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == sum(call[sc.GEN_AI_USAGE_OUTPUT_TOKENS] for call in calls)
    assert agent[sc.GEN_AI_USAGE_OUTPUT_TOKENS] > 3  # the Responses calls' own, not the chat call's alone

def test_the_key_is_noted_on_the_calling_thread_before_the_call_returns(
        server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_builder_thread(monkeypatch)
    noted: list[tuple[str, ...]] = []
    pipeline = Pipeline()
    keep = pipeline.handle.add_secrets
    monkeypatch.setattr(pipeline.handle, "add_secrets", lambda secrets: (noted.append(tuple(secrets)), keep(secrets)))
    with pipeline:
        _client(server).chat.completions.create(model="gpt-test", messages=MESSAGES)  # type: ignore[arg-type]
        assert noted == [(KEY,)]  # nothing of the call is built yet, and the key is known
        spans = pipeline.finished()
    assert KEY.encode() not in encode(spans)


def test_the_process_exit_drains_the_builder_before_the_providers_shut_down(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(textwrap.dedent('''
        import {library} as http
        from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
        from cafe_otel import configure, instrumentation
        from cafe_otel._wire import builder as builder_module

        class Printing(SpanExporter):
            def export(self, spans):
                for span in spans:
                    print("exported", span.name, flush=True)
                return SpanExportResult.SUCCESS

        builder_module.CallBuilder._start = lambda self: None  # only the exit's drain builds
        handle = configure(exporter=Printing(), environ={}, set_global=False, metrics=False)
        instrumentation.OpenAIWireInstrumentor().instrument(telemetry=handle)
        answer = {"id": "chatcmpl-1", "model": "gpt-test", "choices": [], "usage": None}
        client = http.Client(transport=http.MockTransport(lambda request: http.Response(200, json=answer)))
        client.post("http://127.0.0.1:9/v1/chat/completions", json={"model": "gpt-test", "messages": []})
        print("returned", flush=True)
    ''').replace("{library}", SDK_LIBRARY), encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["returned", "exported chat gpt-test"]


class _Call:
    def __init__(self, built: list[tuple[int, str]], number: int, gate: threading.Event | None = None) -> None:
        self.built, self.number, self.gate = built, number, gate

    def build(self) -> None:
        if self.gate is not None:
            self.gate.wait(30)
        self.built.append((self.number, threading.current_thread().name))


def test_a_full_builder_builds_on_the_caller_and_a_drain_builds_what_waits_exactly_once() -> None:
    built: list[tuple[int, str]] = []
    gate = threading.Event()
    builder = builder_module.CallBuilder(limit=1)
    try:
        builder.submit(_Call(built, 0, gate))  # holds the builder's thread once it takes it
        for number in range(1, 4):
            builder.submit(_Call(built, number))
        here = threading.current_thread().name
        # One call waits at most (the limit): the others are built by their caller, not dropped.
        assert len([number for number, thread in built if thread == here]) >= 2
        assert builder.drain(timeout=0.01) is False  # the thread is still held: what waits is built here
        gate.set()
        assert builder.drain(timeout=30) is True
    finally:
        gate.set()
        builder.close()
    assert sorted(number for number, _ in built) == [0, 1, 2, 3]
    builder.submit(_Call(built, 4))  # after close: built by its caller
    assert built[-1] == (4, threading.current_thread().name)


class _HttpClientSpans(http.BaseTransport):  # type: ignore[name-defined,misc]
    """What an HTTP client's instrumentation does: a CLIENT span around each request sent,
    started under the current span, current while the request is sent."""

    def __init__(self, provider: TracerProvider) -> None:
        self.inner = http.HTTPTransport()
        self.tracer = provider.get_tracer("opentelemetry.instrumentation.httpx")
        self.seen: list[int] = []  # the parent span id current when each request was sent

    def handle_request(self, request: Any) -> Any:
        self.seen.append(trace.get_current_span().get_span_context().span_id)
        with self.tracer.start_as_current_span(request.method, kind=SpanKind.CLIENT) as span:
            response = self.inner.handle_request(request)
            span.set_attribute(sc.HTTP_RESPONSE_STATUS_CODE, response.status_code)
            return response

    def close(self) -> None:
        self.inner.close()


def _spanning_client(server: OpenAIServer, transport: Any, *, max_retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=max_retries,
                         http_client=http.Client(transport=transport))


@pytest.mark.parametrize("stream", [False, True])
def test_the_http_clients_span_is_a_child_of_the_chat_span_in_the_calls_own_trace(
        server: OpenAIServer, stream: bool) -> None:
    with Pipeline() as pipeline:
        assert pipeline.handle.provider is not None
        transport = _HttpClientSpans(pipeline.handle.provider)
        client = _spanning_client(server, transport)
        for _ in range(2):  # no span of the user's open: each call is a trace of its own
            reply = client.chat.completions.create(model="gpt-test", messages=MESSAGES,  # type: ignore[arg-type]
                                                   stream=stream)
            if stream:
                for _chunk in reply:  # type: ignore[union-attr]
                    pass
        spans = pipeline.finished()
    chats = sorted((s for s in spans if s.name == "chat gpt-test"), key=lambda s: s.start_time or 0)
    posts = sorted((s for s in spans if s.name == "POST"), key=lambda s: s.start_time or 0)
    assert len(chats) == len(posts) == 2
    for chat, post in zip(chats, posts, strict=True):
        assert chat.parent is None
        assert post.parent is not None and post.parent.span_id == chat.context.span_id
        assert post.context.trace_id == chat.context.trace_id
        # Made early (the HTTP span looked at it), the chat span still has the answer's attributes.
        assert _attrs(chat)[sc.GEN_AI_RESPONSE_ID]
        assert (chat.start_time or 0) <= (post.start_time or 0) <= (post.end_time or 0) <= (chat.end_time or 0)
    assert chats[0].context.trace_id != chats[1].context.trace_id
    assert transport.seen == [chat.context.span_id for chat in chats]


def test_under_a_user_span_the_chat_span_is_its_child_and_the_http_span_the_chat_spans(
        server: OpenAIServer) -> None:
    with Pipeline() as pipeline:
        assert pipeline.handle.provider is not None
        transport = _HttpClientSpans(pipeline.handle.provider)
        with pipeline.handle.provider.get_tracer("myapp").start_as_current_span("handle order") as user:
            _spanning_client(server, transport).chat.completions.create(model="gpt-test", messages=MESSAGES)  # type: ignore[arg-type]
        spans = {s.name: s for s in pipeline.finished()}
    assert trace.get_current_span() is trace.INVALID_SPAN  # the call left the context as it found it
    chat, post = spans["chat gpt-test"], spans["POST"]
    assert chat.parent is not None and chat.parent.span_id == user.get_span_context().span_id
    assert post.parent is not None and post.parent.span_id == chat.context.span_id
    assert {s.context.trace_id for s in spans.values()} == {user.get_span_context().trace_id}


def test_a_retried_call_is_one_chat_span_and_one_duration_point_over_what_the_caller_waited(
        server: OpenAIServer) -> None:
    server.fail_next(429, 500, retryable=True)
    with Pipeline() as pipeline:
        assert pipeline.handle.provider is not None
        transport = _HttpClientSpans(pipeline.handle.provider)
        reply = _spanning_client(server, transport, max_retries=2).chat.completions.create(
            model="gpt-test", messages=MESSAGES)  # type: ignore[arg-type]
        assert reply.choices[0].message.content
        spans = pipeline.finished()
    assert server.count == 3
    (chat,) = [s for s in spans if s.name == "chat gpt-test"]
    posts = sorted((s for s in spans if s.name == "POST"), key=lambda s: s.start_time or 0)
    assert [_attrs(p)[sc.HTTP_RESPONSE_STATUS_CODE] for p in posts] == [429, 500, 200]
    assert all(p.parent is not None and p.parent.span_id == chat.context.span_id for p in posts)
    # The call's span runs from its first attempt's start to its last attempt's end, and ends well.
    assert (chat.start_time or 0) <= (posts[0].start_time or 0)
    assert (posts[-1].end_time or 0) <= (chat.end_time or 0)
    assert sc.ERROR_TYPE not in _attrs(chat) and chat.status.status_code is not StatusCode.ERROR
    (duration,) = pipeline.metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_DURATION)
    assert duration.count == 1 and sc.ERROR_TYPE not in dict(duration.attributes)
    assert duration.sum == pytest.approx(((chat.end_time or 0) - (chat.start_time or 0)) / 1e9, abs=0.05)


def test_without_an_http_instrumentation_each_attempt_of_a_retried_call_is_a_child_span(
        server: OpenAIServer) -> None:
    server.fail_next(429, 429, 429, retryable=True)
    with Pipeline() as pipeline:
        with pytest.raises(openai.RateLimitError):
            openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=2).chat.completions.create(
                model="gpt-test", messages=MESSAGES)  # type: ignore[arg-type]
        spans = pipeline.finished()  # the flush ends the call still waiting for a retry that never comes
    (chat,) = [s for s in spans if s.name == "chat gpt-test"]
    attempts = sorted((s for s in spans if s is not chat), key=lambda s: s.start_time or 0)
    assert [(s.name, s.kind) for s in attempts] == [("POST", SpanKind.CLIENT)] * 3
    assert all(s.parent is not None and s.parent.span_id == chat.context.span_id for s in attempts)
    assert [_attrs(s).get(sc.HTTP_REQUEST_RESEND_COUNT) for s in attempts] == [None, 1, 2]
    assert [_attrs(s)[sc.HTTP_RESPONSE_STATUS_CODE] for s in attempts] == [429] * 3
    assert _attrs(chat)[sc.ERROR_TYPE] == "429" and chat.status.status_code is StatusCode.ERROR
    assert (chat.start_time or 0) <= (attempts[0].start_time or 0)
    assert (attempts[-1].end_time or 0) <= (chat.end_time or 0)
    (duration,) = pipeline.metrics.points(sc.METRIC_GEN_AI_CLIENT_OPERATION_DURATION)
    assert duration.count == 1 and dict(duration.attributes)[sc.ERROR_TYPE] == "429"


def test_a_call_not_retried_is_one_span_with_no_attempt_children(server: OpenAIServer) -> None:
    server.fail_next(429, retryable=True)  # retryable, but the client does not retry
    with Pipeline() as pipeline:
        with pytest.raises(openai.RateLimitError):
            _client(server).chat.completions.create(model="gpt-test", messages=MESSAGES)  # type: ignore[arg-type]
        _client(server).chat.completions.create(model="next", messages=MESSAGES)  # type: ignore[arg-type]
        spans = pipeline.finished()
    assert sorted(s.name for s in spans) == ["chat gpt-test", "chat next"]


def test_two_instrumented_handles_on_one_call_leave_the_calling_context_as_it_was(server: OpenAIServer) -> None:
    second = InMemorySpanExporter()
    handle = configure(exporter=second, environ={}, set_global=False)
    observer = handle.wire_observer()
    assert observer is not None
    try:
        with Pipeline() as first, wire.intercept([observer]):
            _client(server).chat.completions.create(model="gpt-test", messages=MESSAGES)  # type: ignore[arg-type]
            assert trace.get_current_span() is trace.INVALID_SPAN
            handle.force_flush(2.0)
            (one,), (other,) = first.finished(), second.get_finished_spans()
    finally:
        handle.shutdown(2.0)
    assert one.parent is None and other.parent is None


class _EventPipeline(Pipeline):
    """The pipeline with its content events kept in memory."""

    def __init__(self, **options: Any) -> None:
        self.logs = InMemoryLogRecordExporter()
        advanced = options.pop("advanced", None) or AdvancedOptions(log_exporter=self.logs)
        super().__init__(advanced=advanced, **options)

    def records(self) -> list[Any]:
        self.handle.force_flush(2.0)
        return [kept.log_record for kept in self.logs.get_finished_logs()]


def _schema(name: str) -> dict[str, Any]:
    import json

    root = Path(__file__).resolve().parents[2]
    for candidate in (root.parent / "shared" / "semconv-1.41.1", root.parent.parent / "shared" / "semconv-1.41.1"):
        path = candidate / "docs" / "gen-ai" / name
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]
    pytest.skip("the pinned semantic conventions (semconv-1.41.1) are not beside this checkout")


@pytest.mark.parametrize("stream", [False, True])
def test_event_only_capture_emits_the_content_event_as_a_log_record_in_the_calls_span(
        server: OpenAIServer, stream: bool) -> None:
    import jsonschema

    with _EventPipeline(capture_content="EVENT_ONLY") as pipeline:
        reply = _client(server).chat.completions.create(model="gpt-test", messages=MESSAGES,  # type: ignore[arg-type]
                                                        stream=stream)
        if stream:
            for _chunk in reply:  # type: ignore[union-attr]
                pass
        (span,) = pipeline.finished()
        (record,) = pipeline.records()
    assert not set(_attrs(span)) & sc.CONTENT_ATTRIBUTES  # EVENT_ONLY: no content on the span
    assert record.event_name == "gen_ai.client.inference.operation.details" and record.body is None
    assert (record.trace_id, record.span_id) == (span.context.trace_id, span.context.span_id)
    assert record.timestamp == span.end_time
    attributes = dict(record.attributes or {})
    assert attributes[sc.GEN_AI_OPERATION_NAME] == "chat" and attributes[sc.GEN_AI_REQUEST_MODEL] == "gpt-test"
    history, answer = attributes[sc.GEN_AI_INPUT_MESSAGES], attributes[sc.GEN_AI_OUTPUT_MESSAGES]
    jsonschema.validate(_plain(history), _schema("gen-ai-input-messages.json"))
    jsonschema.validate(_plain(answer), _schema("gen-ai-output-messages.json"))
    assert [message["role"] for message in history] == ["system", "user"]
    assert answer[0]["parts"][0]["content"].startswith("Sure one latte")


def _plain(value: Any) -> Any:
    """A log attribute's value (the SDK keeps sequences as tuples) as JSON has it."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def test_span_and_event_capture_puts_content_on_both_and_no_capture_makes_no_event(server: OpenAIServer) -> None:
    with _EventPipeline(capture_content="SPAN_AND_EVENT") as pipeline:
        _client(server).chat.completions.create(model="gpt-test", messages=MESSAGES)  # type: ignore[arg-type]
        (span,) = pipeline.finished()
        (record,) = pipeline.records()
    assert sc.GEN_AI_INPUT_MESSAGES in _attrs(span) and sc.GEN_AI_INPUT_MESSAGES in dict(record.attributes or {})
    for mode in ("NO_CONTENT", "SPAN_ONLY"):
        with _EventPipeline(capture_content=mode) as pipeline:
            _client(server).chat.completions.create(model="gpt-test", messages=MESSAGES)  # type: ignore[arg-type]
            assert len(pipeline.finished()) == 1
            assert pipeline.records() == [] and pipeline.handle.logger_provider is None


def test_the_content_event_carries_no_key_and_only_allowlisted_metadata(server: OpenAIServer) -> None:
    import json

    messages = [{"role": "system", "content": f"Key {KEY} here."}, {"role": "user", "content": SECRET_TEXT}]
    with _EventPipeline(capture_content="EVENT_ONLY") as pipeline:
        _client(server).chat.completions.create(model="gpt-test", messages=messages,  # type: ignore[arg-type]
                                                extra_headers={"x-myapp-note": "private"})
        (record,) = pipeline.records()
    written = json.dumps(_plain(dict(record.attributes or {})))
    assert KEY not in written and "Key [REDACTED] here." in written  # scrubbed as content on a span is
    assert set(record.attributes or {}) <= sc.METADATA_ALLOWLIST | sc.CONTENT_ATTRIBUTES


def test_a_failing_logs_exporter_never_fails_the_call_and_is_counted_in_the_account(server: OpenAIServer) -> None:
    class Broken(InMemoryLogRecordExporter):
        def export(self, batch: Any) -> Any:
            raise ConnectionError("collector down")

    with _EventPipeline(capture_content="EVENT_ONLY", advanced=AdvancedOptions(log_exporter=Broken())) as pipeline:
        reply = _client(server).chat.completions.create(model="gpt-test", messages=MESSAGES)  # type: ignore[arg-type]
        assert reply.choices[0].message.content
        assert len(pipeline.finished()) == 1
        assert pipeline.handle.account.snapshot().lost("logs") == 1
