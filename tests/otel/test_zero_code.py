"""`opentelemetry-instrument python agent.py`: a plain `openai` program, unchanged, gets our
pipeline (spans and metrics, metadata only, the account at exit) with no code change."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from cafe_otel import semconv as sc
from cafe_otel._metrics.listener import DURATION_BUCKETS
from tests.wire.openai_server import OpenAIServer

from .test_cli_plugin import Receiver

KEY = "sk-zero-code-9d8c7b6a5f4e3d2c1b0a"
CUSTOMER = "Zq9CANARY my address is 12 Rue de la Paix"

AGENT = f"""
import gc
import openai

client = openai.OpenAI(max_retries=0)
messages = [{{"role": "system", "content": "You are a barista."}}, {{"role": "user", "content": {CUSTOMER!r}}}]
client.chat.completions.create(model="plain", messages=messages, max_tokens=4)
for _chunk in client.chat.completions.create(model="streamed", messages=messages, stream=True,
                                             stream_options={{"include_usage": True}}):
    pass
abandoned = client.chat.completions.create(model="abandoned", messages=messages, stream=True)
next(iter(abandoned))
del abandoned
gc.collect()
try:
    client.chat.completions.create(model="failing", messages=messages)
except openai.RateLimitError:
    print("rate limited")
"""


class FailingModelServer(OpenAIServer):
    """Answers 429 to the model named `failing`, as a provider's rate limit would."""

    def _take_failure(self) -> int | None:
        with self._lock:
            body = self.received[-1].body if self.received else None
        return 429 if isinstance(body, dict) and body.get("model") == "failing" else None


def _instrument_command() -> Path:
    command = Path(sys.executable).parent / "opentelemetry-instrument"
    found = command if command.exists() else shutil.which("opentelemetry-instrument")
    names = {entry.name for entry in entry_points(group="opentelemetry_instrumentor")}
    if found is None or "cafe_openai" not in names:
        pytest.skip("opentelemetry-instrument or cafe-otel's entry points are not installed "
                    "(pip install -e . in this environment)")
    return Path(found)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    found.thread.start()
    yield found
    found.server.shutdown()
    found.server.server_close()


def test_a_plain_openai_program_is_instrumented_with_no_code_change(tmp_path: Path, receiver: Receiver) -> None:
    command = _instrument_command()
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT, encoding="utf-8")
    with FailingModelServer.running() as server:
        environ = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "OPENAI_"))}
        environ.update({
            "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": KEY,
            "OTEL_SERVICE_NAME": "plain-agent", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_METRIC_EXPORT_INTERVAL": "600000",
        })
        done = subprocess.run([str(command), sys.executable, str(agent)], env=environ, capture_output=True,
                              text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "rate limited" in done.stdout
    assert "cafe-otel: telemetry: 4 spans exported, 0 dropped" in done.stderr
    scopes = [scope for request in receiver.requests for rs in request.resource_spans for scope in rs.scope_spans]
    assert {scope.schema_url for scope in scopes} == {sc.SCHEMA_URL}
    spans = {span.name: span for scope in scopes for span in scope.spans}
    assert set(spans) == {"chat plain", "chat streamed", "chat abandoned", "chat failing"}
    assert all(span.kind == span.SPAN_KIND_CLIENT for span in spans.values())

    def attributes(name: str) -> dict[str, object]:
        found = {}
        for item in spans[name].attributes:
            value = item.value
            found[item.key] = getattr(value, value.WhichOneof("value"))
        return found

    plain, streamed, abandoned, failing = (attributes(name) for name in
                                           ("chat plain", "chat streamed", "chat abandoned", "chat failing"))
    assert plain[sc.GEN_AI_REQUEST_MAX_TOKENS] == 4 and plain[sc.GEN_AI_USAGE_INPUT_TOKENS] == 11
    assert plain[sc.GEN_AI_REQUEST_STREAM] is False
    assert streamed[sc.GEN_AI_REQUEST_STREAM] is True and streamed[sc.GEN_AI_USAGE_OUTPUT_TOKENS] > 0
    for stream in (streamed, abandoned):
        assert stream[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] >= 0  # type: ignore[operator]
    assert spans["chat abandoned"].end_time_unix_nano >= spans["chat abandoned"].start_time_unix_nano > 0
    assert failing[sc.ERROR_TYPE] == "429"

    points = receiver.metric_points()
    durations = [point for name, point in points if name == sc.METRIC_GEN_AI_CLIENT_OPERATION_DURATION]
    assert all(tuple(point.explicit_bounds) == DURATION_BUCKETS for point in durations)
    errors = [{item.key: item.value.string_value for item in point.attributes}.get(sc.ERROR_TYPE)
              for point in durations]
    assert sorted(error or "" for error in errors) == ["", "", "", "429"]  # one point a model
    first_chunks = [point for name, point in points if name == sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK]
    assert sum(point.count for point in first_chunks) == 2  # both streams, the abandoned one too
    assert any(name == sc.METRIC_GEN_AI_CLIENT_OPERATION_TIME_PER_OUTPUT_CHUNK for name, _ in points)

    exported = receiver.raw()
    for text in (KEY, CUSTOMER, "Zq9CANARY", "barista"):
        assert text.encode() not in exported


@pytest.mark.parametrize(("extra", "expected"), [
    ({"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "cafe_openai"}, "cafe-otel: telemetry: 0 spans exported"),
    ({"OTEL_TRACES_EXPORTER": "zipkin"}, "cafe-otel: telemetry is off: OTEL_TRACES_EXPORTER"),
])
def test_the_instrumentor_can_be_left_out_and_a_bad_setting_leaves_the_program_running(
        tmp_path: Path, receiver: Receiver, extra: dict[str, str], expected: str) -> None:
    command = _instrument_command()
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT, encoding="utf-8")
    with FailingModelServer.running() as server:
        environ = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "OPENAI_"))}
        environ.update({"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": KEY,
                        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
                        "OTEL_METRICS_EXPORTER": "none", **extra})
        done = subprocess.run([str(command), sys.executable, str(agent)], env=environ, capture_output=True,
                              text=True, timeout=120, cwd=tmp_path)
        assert server.count == 4  # the program ran all its calls
    assert done.returncode == 0, done.stderr[-2000:]
    assert expected in done.stderr
    assert receiver.spans() == []
    assert "Traceback" not in done.stderr
