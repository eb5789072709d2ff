"""MLflow (a real GenAI consumer, Apache-2.0) receives a café shift and a plain `openai` SDK
program, content capture on, and shows what its users expect: chat spans as LLM spans with
model and tokens, tool and agent spans, and the system prompt in the chat's inputs.

MLflow lives in its own cached venv (scripts/mlflow-venv.sh, keyed by
tests/e2e/mlflow-requirements.txt, under ~/.cache/cafe-otel/mlflow); this test starts it on a
free 127.0.0.1 port in its own session and stops that session only. Missing, the test skips
with the command that installs it, or fails when CAFE_E2E_STRICT=1.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

import cafe
from cafe_otel import BatchOptions, configure
from cafe_otel.instrumentation import OpenAIWireInstrumentor
from otelstack.procs import free_ports
from tests.wire.openai_server import OpenAIServer

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "tests" / "e2e" / "mlflow-requirements.txt"
HINT = "bash scripts/mlflow-venv.sh (installs MLflow into its own cached venv)"
SDK_SYSTEM = "You are the espresso bar's helper."


def _mlflow_command() -> Path:
    explicit = os.environ.get("CAFE_MLFLOW_BIN")
    if explicit:
        path = Path(explicit)
    else:
        key = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:16]
        cache = Path(os.environ.get("CAFE_MLFLOW_CACHE", Path.home() / ".cache" / "cafe-otel" / "mlflow"))
        path = cache / key / "bin" / "mlflow"
        if not (cache / key / ".complete").is_file():
            path = cache / key / ".incomplete"
    if path.is_file() and os.access(path, os.X_OK):
        return path
    message = f"MLflow not found at {path} ({HINT})"
    if explicit or os.environ.get("CAFE_E2E_STRICT") == "1":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _call(url: str, body: dict[str, Any] | None = None, timeout: float = 10.0) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"},
                                     method="GET" if body is None else "POST")
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        found: dict[str, Any] = json.loads(answer.read() or b"{}")
        return found


class MLflow:
    def __init__(self, command: Path, workdir: Path) -> None:
        self.port = free_ports("mlflow")["mlflow"]
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "mlflow.log"
        with self.log.open("wb") as log:
            # Its own session: stopping it stops the server's workers too, and nothing else.
            self.proc = subprocess.Popen(
                [str(command), "server", "--backend-store-uri", f"sqlite:///{workdir / 'mlflow.db'}",
                 "--default-artifact-root", str(workdir / "artifacts"), "--host", "127.0.0.1",
                 "--port", str(self.port), "--workers", "1"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd=workdir)

    def wait_ready(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"mlflow server exited ({self.proc.returncode}): {self.tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        raise AssertionError(f"mlflow server not ready in {timeout:.0f} s: {self.tail()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        else:  # the server left; its workers may not have
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    def tail(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-3000:]

    def experiment(self, name: str) -> str:
        return str(_call(f"{self.url}/api/2.0/mlflow/experiments/create", {"name": name})["experiment_id"])

    def traces(self, experiment: str, expected: int, timeout: float = 60.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        found: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            found = _call(f"{self.url}/api/3.0/mlflow/traces/search",
                          {"locations": [{"mlflow_experiment": {"experiment_id": experiment}}]}).get("traces", [])
            if len(found) >= expected:
                break
            time.sleep(0.5)
        return [_call(f"{self.url}/api/3.0/mlflow/traces/get?trace_id={trace['trace_id']}")["trace"]
                for trace in found]


@pytest.fixture
def mlflow(tmp_path: Path) -> Iterator[MLflow]:
    server = MLflow(_mlflow_command(), tmp_path)
    try:
        server.wait_ready()
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
    cafe.run_shift(cafe.ScriptedClient(), list(cafe.DEFAULT_SCRIPT), cafe.make_responder([]), tracer=handle.tracer())
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
