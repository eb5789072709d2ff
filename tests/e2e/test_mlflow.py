"""MLflow (a real GenAI consumer, Apache-2.0) receives a café shift and a plain `openai` SDK
program, content capture on, and shows what its users expect: chat spans as LLM spans with
model and tokens, tool and agent spans, and the system prompt in the chat's inputs.

MLflow lives in its own cached venv (scripts/mlflow-venv.sh, keyed by
tests/e2e/mlflow-requirements.txt, under ~/.cache/cafe-otel/mlflow); this test starts it on a
free 127.0.0.1 port in its own session and stops that session only. Missing, the test skips
with the command that installs it, or fails when CAFE_E2E_STRICT=1.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from cafe import counter
from cafe_otel import BatchOptions, configure
from cafe_otel.instrumentation import OpenAIWireInstrumentor
from otelstack.procs import free_ports
from tests.e2e.consumers import ConsumerServer, call_json, consumer_command
from tests.e2e.programs import (
    RESPONSES_ORDER,
    RESPONSES_PROGRAM,
    RESPONSES_QUESTION,
    RESPONSES_SYSTEM,
    RESPONSES_TOOL_OUTPUT,
    run_instrumented,
)
from tests.wire.anthropic_server import AnthropicServer
from tests.wire.openai_server import OpenAIServer
from tests.wire.responses_server import ResponsesServer

pytestmark = pytest.mark.e2e

SDK_SYSTEM = "You are the espresso bar's helper."
RESPONSES_KEY = "sk-e2e-mlflow-responses-9f8e7d6c5b4a"


class MLflow(ConsumerServer):
    def __init__(self, command: Path, workdir: Path) -> None:
        self.port = free_ports("mlflow")["mlflow"]
        self.url = f"http://127.0.0.1:{self.port}"
        self.workdir = workdir
        super().__init__("mlflow", [
            str(command), "server", "--backend-store-uri", f"sqlite:///{workdir / 'mlflow.db'}",
            "--default-artifact-root", str(workdir / "artifacts"), "--host", "127.0.0.1",
            "--port", str(self.port), "--workers", "1"], workdir, os.environ)

    def experiment(self, name: str) -> str:
        return str(call_json(f"{self.url}/api/2.0/mlflow/experiments/create", {"name": name})["experiment_id"])

    def stored_bytes(self, excluding: Path) -> bytes:
        """Every byte MLflow wrote (its database, artifacts and output), files under `excluding` left out."""
        files = sorted(path for path in self.workdir.rglob("*")
                       if path.is_file() and not path.is_relative_to(excluding))
        return b"".join(path.read_bytes() for path in files)

    def traces(self, experiment: str, expected: int, timeout: float = 60.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        found: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            found = call_json(f"{self.url}/api/3.0/mlflow/traces/search",
                              {"locations": [{"mlflow_experiment": {"experiment_id": experiment}}]}).get("traces", [])
            if len(found) >= expected:
                break
            time.sleep(0.5)
        return [call_json(f"{self.url}/api/3.0/mlflow/traces/get?trace_id={trace['trace_id']}")["trace"]
                for trace in found]


@pytest.fixture
def mlflow(tmp_path: Path) -> Iterator[MLflow]:
    server = MLflow(consumer_command("mlflow"), tmp_path)
    try:
        server.wait_ready(f"{server.url}/health", timeout=180.0)
        yield server
    finally:
        server.stop()


def _value(value: dict[str, Any]) -> Any:
    """An OTLP AnyValue in MLflow's JSON as a plain value."""
    if "string_value" in value:
        return value["string_value"]
    if "int_value" in value:
        return int(value["int_value"])
    if "double_value" in value:
        return value["double_value"]
    if "bool_value" in value:
        return value["bool_value"]
    if "array_value" in value:
        return [_value(item) for item in value["array_value"].get("values", [])]
    if "kvlist_value" in value:
        return {item["key"]: _value(item["value"]) for item in value["kvlist_value"].get("values", [])}
    return None


def _spans(trace: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(span["name"], {item["key"]: _value(item["value"]) for item in span.get("attributes", [])})
            for span in trace.get("spans", [])]


def test_mlflow_shows_a_cafe_shift_and_a_plain_sdk_program_as_its_users_expect(mlflow: MLflow) -> None:
    experiment = mlflow.experiment("cafe-otel-e2e")
    handle = configure(service_name="cafe-e2e", endpoint=mlflow.url, protocol="http/protobuf",
                       headers={"x-mlflow-experiment-id": experiment}, capture_content=True, metrics=False,
                       set_global=False, environ={}, batch=BatchOptions(export_timeout=30))
    # A café shift (its own spans: agent, chat, tools).
    counter.run_shift(counter.ScriptedClient(), list(counter.DEFAULT_SCRIPT), counter.make_responder([]),
                      tracer=handle.tracer())
    # A plain SDK program, instrumented on the wire.
    instrumentor = OpenAIWireInstrumentor()
    instrumentor.instrument(telemetry=handle)
    try:
        with OpenAIServer.running() as server:
            client = openai.OpenAI(base_url=server.base_url, api_key="sk-e2e-mlflow-0123456789abcdef", max_retries=0)
            client.chat.completions.create(model="sdk-model", max_tokens=6, messages=[  # type: ignore[call-overload]
                {"role": "system", "content": SDK_SYSTEM}, {"role": "user", "content": "A flat white?"}])
    finally:
        instrumentor.uninstrument()
    handle.shutdown(30.0)
    assert handle.account.dropped == 0, handle.account.summary()

    traces = mlflow.traces(experiment, expected=2)
    assert len(traces) == 2, mlflow.tail()
    by_service = {}
    for trace in traces:
        spans = _spans(trace)
        names = {name for name, _ in spans}
        by_service["cafe" if any(name.startswith("invoke_agent") for name in names) else "sdk"] = spans
    assert set(by_service) == {"cafe", "sdk"}

    for spans in by_service.values():
        chats = [attributes for name, attributes in spans if name.startswith("chat ")]
        assert chats
        for chat in chats:
            assert chat["mlflow.spanType"] in ("CHAT_MODEL", "LLM")
            assert chat["mlflow.llm.model"]
            usage = chat["mlflow.chat.tokenUsage"]
            assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
            roles = [message["role"] for message in chat["mlflow.spanInputs"]]
            assert roles[0] == "system"  # the system prompt, as part of the chat history

    cafe_types = {attributes.get("mlflow.spanType") for _, attributes in by_service["cafe"]}
    assert {"AGENT", "TOOL"} <= cafe_types
    (sdk_chat,) = [attributes for name, attributes in by_service["sdk"] if name == "chat sdk-model"]
    system = sdk_chat["mlflow.spanInputs"][0]["parts"][0]["content"]
    assert system == SDK_SYSTEM
    assert sdk_chat["mlflow.llm.provider"] == "openai"


def test_mlflow_shows_anthropic_calls_with_their_cache_tokens_and_an_embeddings_call(mlflow: MLflow) -> None:
    experiment = mlflow.experiment("cafe-otel-e2e-anthropic")
    handle = configure(service_name="claude-e2e", endpoint=mlflow.url, protocol="http/protobuf",
                       headers={"x-mlflow-experiment-id": experiment}, capture_content=True, metrics=False,
                       set_global=False, environ={}, batch=BatchOptions(export_timeout=30))
    system: Any = [{"type": "text", "text": SDK_SYSTEM, "cache_control": {"type": "ephemeral"}}]
    order: Any = [{"role": "user", "content": "A flat white?"}]
    instrumentor = OpenAIWireInstrumentor()
    instrumentor.instrument(telemetry=handle)
    try:
        with AnthropicServer.running() as claude, OpenAIServer.running() as server:
            # The SDK's own tracing goes to the global provider, not to this handle's.
            client = anthropic.Anthropic(base_url=claude.base_url, api_key="e2e-mlflow-anthropic-credential",
                                         max_retries=0)
            client.messages.create(model="claude-e2e", max_tokens=64, system=system, messages=order)
            with client.messages.stream(model="claude-e2e", max_tokens=64, system=system, messages=order) as stream:
                stream.until_done()
            openai.OpenAI(base_url=server.base_url, api_key="sk-e2e-mlflow-0123456789abcdef",
                          max_retries=0).embeddings.create(model="embed-e2e", input=["a flat white"],
                                                           encoding_format="float")
    finally:
        instrumentor.uninstrument()
    handle.shutdown(30.0)
    assert handle.account.dropped == 0, handle.account.summary()

    traces = mlflow.traces(experiment, expected=3)
    assert len(traces) == 3, mlflow.tail()
    spans = sorted((span for trace in traces for span in _spans(trace)), key=lambda span: span[0])
    assert [name for name, _ in spans] == ["chat claude-e2e", "chat claude-e2e", "embeddings embed-e2e"]
    chats = [attributes for name, attributes in spans if name.startswith("chat ")]
    for chat in chats:
        assert chat["mlflow.spanType"] == "CHAT_MODEL" and chat["mlflow.llm.model"] == "claude-e2e"
        assert chat["mlflow.llm.provider"] == "anthropic"
        assert [message["role"] for message in chat["mlflow.spanInputs"]] == ["user"]
        assert chat["mlflow.spanOutputs"][0]["role"] == "assistant"
    # The system prompt is written to the cache by one call and read by the other; each call's
    # input tokens count the cached ones too, as the 1.41.1 Anthropic span says.
    written, read = usages = sorted((chat["mlflow.chat.tokenUsage"] for chat in chats),
                                    key=lambda usage: usage["cache_read_input_tokens"])
    assert written["cache_creation_input_tokens"] == read["cache_read_input_tokens"] > 0
    assert written["input_tokens"] == read["input_tokens"] > read["cache_read_input_tokens"]
    assert all(usage["output_tokens"] > 0 for usage in usages)
    ((_, embedded),) = [span for span in spans if span[0].startswith("embeddings ")]
    assert embedded["mlflow.spanType"] == "EMBEDDING" and embedded["mlflow.chat.tokenUsage"]["input_tokens"] > 0


# Each attempt of the retried call answers after this long: one span over both is longer than two.
ATTEMPT_S = 0.3


def test_mlflow_shows_a_retried_call_once_with_the_time_the_caller_waited(mlflow: MLflow) -> None:
    experiment = mlflow.experiment("cafe-otel-e2e-retried")
    handle = configure(service_name="retried-e2e", endpoint=mlflow.url, protocol="http/protobuf",
                       headers={"x-mlflow-experiment-id": experiment}, capture_content=True, metrics=False,
                       set_global=False, environ={}, batch=BatchOptions(export_timeout=30))
    instrumentor = OpenAIWireInstrumentor()
    instrumentor.instrument(telemetry=handle)
    try:
        with OpenAIServer.running() as server:
            server.delay(ATTEMPT_S)
            server.fail_next(429, retryable=True)  # a rate limit, then the answer
            client = openai.OpenAI(base_url=server.base_url, api_key="sk-e2e-mlflow-0123456789abcdef", max_retries=2)
            started = time.monotonic()
            client.chat.completions.create(model="sdk-model", messages=[{"role": "user", "content": "A cortado?"}])
            waited = time.monotonic() - started
            assert server.count == 2
    finally:
        instrumentor.uninstrument()
    handle.shutdown(30.0)
    assert handle.account.dropped == 0, handle.account.summary()

    (trace,) = mlflow.traces(experiment, expected=1)
    spans = trace.get("spans", [])
    chats = [span for span in spans if span["name"] == "chat sdk-model"]
    assert len(chats) == 1, [span["name"] for span in spans]  # one call, however many attempts
    (chat,) = chats
    attempts = [span for span in spans if span is not chat]
    assert [span["name"] for span in attempts] == ["POST", "POST"]
    assert all(span["parent_span_id"] == chat["span_id"] for span in attempts)
    seconds = (int(chat["end_time_unix_nano"]) - int(chat["start_time_unix_nano"])) / 1e9
    assert 2 * ATTEMPT_S <= seconds <= waited
    (_, attributes), = [(name, attrs) for name, attrs in _spans(trace) if name == "chat sdk-model"]
    assert attributes["mlflow.spanType"] in ("CHAT_MODEL", "LLM")


def test_mlflow_shows_a_responses_program_under_opentelemetry_instrument(mlflow: MLflow, tmp_path: Path) -> None:
    experiment = mlflow.experiment("cafe-otel-e2e-responses")
    workdir = tmp_path / "program"
    workdir.mkdir()
    with ResponsesServer.running() as server:
        done = run_instrumented(RESPONSES_PROGRAM, workdir, {
            "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": RESPONSES_KEY,
            "OTEL_SERVICE_NAME": "responses-agent", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_ENDPOINT": mlflow.url,
            "OTEL_EXPORTER_OTLP_HEADERS": f"x-mlflow-experiment-id={experiment}",
            # MLflow's first answer can take seconds on a loaded machine (the default bound is 5 s).
            "OTEL_EXPORTER_OTLP_TIMEOUT": "30000",
            "OTEL_METRICS_EXPORTER": "none", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "cafe-otel: telemetry: 3 spans exported, 0 dropped" in done.stderr
    assert {received.headers.get("authorization") for received in server.received} == {f"Bearer {RESPONSES_KEY}"}
    returned = json.loads(done.stdout)

    traces = mlflow.traces(experiment, expected=3)
    assert len(traces) == 3, mlflow.tail()
    spans = [span for trace in traces for span in _spans(trace)]
    assert sorted(name for name, _ in spans) == ["chat resp-e2e", "chat resp-e2e", "chat resp-stream"], mlflow.tail()
    # The plain call is the one with a token limit; the other `resp-e2e` call answers the tool.
    ((_, plain_chat),) = [span for span in spans if "gen_ai.request.max_tokens" in span[1]]
    ((_, streamed_chat),) = [span for span in spans if span[0] == "chat resp-stream"]
    ((_, answered_chat),) = [span for span in spans if span[1] not in (plain_chat, streamed_chat)]
    for chat, model in ((plain_chat, "resp-e2e"), (streamed_chat, "resp-stream"), (answered_chat, "resp-e2e")):
        assert chat["mlflow.spanType"] == "CHAT_MODEL" and chat["mlflow.llm.provider"] == "openai"
        assert chat["mlflow.llm.model"] == f"{model}-2025-04-14"  # the model that answered
        assert chat["gen_ai.request.model"] == model and chat["openai.api.type"] == "responses"
        usage = chat["mlflow.chat.tokenUsage"]
        assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
        assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
        # `instructions` are the call's system instructions: MLflow keeps them as the span's
        # attribute but leaves them out of the chat's inputs, which hold the conversation only.
        assert chat["gen_ai.system_instructions"] == [{"type": "text", "content": RESPONSES_SYSTEM}]
        assert "system" not in [message["role"] for message in chat["mlflow.spanInputs"]]
    assert plain_chat["mlflow.spanInputs"] == [{"role": "user", "parts": [
        {"type": "text", "content": RESPONSES_ORDER}]}]
    assert plain_chat["mlflow.spanOutputs"] == [{"role": "assistant", "finish_reason": "stop", "parts": [
        {"type": "text", "content": returned["plain"]}]}]
    assert plain_chat["gen_ai.request.max_tokens"] == 40 and "mlflow.chat.tools" not in plain_chat
    # The streamed call's tool call, assembled from its argument deltas, and its answer.
    tool_call = {"type": "tool_call", "id": returned["call_id"], "name": "price_check",
                 "arguments": returned["arguments"]}
    assert streamed_chat["gen_ai.request.stream"] is True
    assert streamed_chat["mlflow.spanOutputs"] == [{"role": "assistant", "finish_reason": "tool_call",
                                                    "parts": [tool_call]}]
    for chat in (streamed_chat, answered_chat):
        assert [tool["name"] for tool in chat["mlflow.chat.tools"]] == ["price_check"]
    assert answered_chat["mlflow.spanInputs"] == [
        {"role": "user", "parts": [{"type": "text", "content": RESPONSES_QUESTION}]},
        {"role": "assistant", "parts": [tool_call]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": returned["call_id"],
                                    "response": RESPONSES_TOOL_OUTPUT}]}]
    assert answered_chat["mlflow.spanOutputs"][0]["parts"] == [{"type": "text", "content": returned["answered"]}]

    stored = mlflow.stored_bytes(excluding=workdir)
    assert RESPONSES_QUESTION.encode() in stored  # captured content is in what was read ...
    assert RESPONSES_KEY.encode() not in stored  # ... and the key is nowhere
