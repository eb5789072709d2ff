"""One seam: a café shift recorded live goes through cafe.wire, so its recording holds the
HTTP exchanges (version 2) beside the café's calls; it replays offline through the wire
(the whole body compared), through the café's ReplayClient (its four arguments), and
exports, renders and makes golden files as a version 1 recording does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import cafe.wire as wire
from cafe.counter.replay_client import ReplayClient
from cafe.recording.reader import load_recording
from tests.local_http import QuietHandler, serving
from tests.wire.openai_server import OpenAIServer

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-test-shift-on-the-wire-0123456789"


def _cafe(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {key: value for key, value in os.environ.items()
               if not key.startswith(("CAFE_", "COURSE_", "OPENAI_", "OTEL_"))}
    environ.update({"PYTHONPATH": str(REPO), "OTEL_SDK_DISABLED": "false"}, **(env or {}))
    return subprocess.run([sys.executable, "-m", "cafe", *arguments], env=environ, capture_output=True, text=True,
                          timeout=120, check=False)


def _live(server: OpenAIServer, model: str = "cafe-model-1") -> dict[str, str]:
    return {"CAFE_MODE": "live", "CAFE_BASE_URL": server.base_url, "CAFE_API_KEY": KEY, "CAFE_MODEL": model}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A café shift recorded live through the local server, which is stopped afterwards."""
    path = tmp_path_factory.mktemp("shift") / "shift.jsonl"
    with OpenAIServer.running() as server:
        done = _cafe("shift", "--record", str(path), "--seed", "7", env=_live(server))
        assert done.returncode == 0, done.stderr
        assert server.count == 2
    yield path


def test_a_live_shift_recording_holds_the_cafe_calls_and_their_exchanges(recorded: Path) -> None:
    lines = [json.loads(line) for line in recorded.read_text().splitlines()]
    header, calls = lines[0], [line for line in lines if "call" in line]
    assert header["version"] == 5 and header["model"] == "cafe-model-1" and header["script"]
    assert len(calls) == 2
    # The second call's conversation extends the first's: its line holds what is new in it.
    assert "extends" not in calls[0] and calls[1]["extends"]["call"] == 1
    assert set(calls[0]["request"]) == {"messages", "tools", "temperature", "tool_choice"}
    read = load_recording(recorded).calls
    assert [set(call.request) for call in read] == [set(calls[0]["request"])] * 2
    for call, whole in zip(calls, read, strict=True):
        exchange = call["exchange"]
        assert exchange["method"] == "POST" and exchange["target"] == "/v1/chat/completions"
        assert exchange["request_json"]["model"] == "cafe-model-1"
        assert exchange["request_json"]["messages"] == whole.request["messages"]
        assert exchange["response_json"]["choices"][0]["message"]["content"] == \
            call["response"]["choices"][0]["message"]["content"]
    assert KEY not in recorded.read_text()


def test_it_replays_through_the_wire_with_the_server_stopped(recorded: Path) -> None:
    done = _cafe("replay", str(recorded))
    assert done.returncode == 0, done.stderr
    assert "transcript matches; every recorded call used" in done.stdout


def test_the_cafe_replay_client_still_compares_the_four_arguments(recorded: Path) -> None:
    recording = load_recording(recorded)
    client = ReplayClient(recording)
    first = recording.calls[0].request
    reply = client.chat(first["messages"], first["tools"], first["temperature"], first["tool_choice"])
    assert reply == recording.calls[0].response
    assert client.unused == 1


def test_a_changed_model_setting_fails_naming_the_path_and_the_page_marks_it(recorded: Path,
                                                                              tmp_path: Path) -> None:
    page = tmp_path / "mismatch.html"
    done = _cafe("replay", str(recorded), "--report", str(page), env={"CAFE_MODEL": "cafe-model-2"})
    assert done.returncode == 41
    (line,) = done.stderr.splitlines()
    assert "call 1: the request differs from the recording at $.model: recorded 'cafe-model-1', " \
           "incoming 'cafe-model-2'" in line
    shown = page.read_text()
    assert 'data-path="$.model"' in shown
    assert '<span class="diff" id="diff-recorded" data-path="$.model">&quot;cafe-model-1&quot;</span>' in shown
    assert '<span class="diff" id="diff-incoming" data-path="$.model">&quot;cafe-model-2&quot;</span>' in shown


def test_it_exports_to_an_otlp_receiver_renders_and_makes_a_golden_file(recorded: Path, tmp_path: Path) -> None:
    received: list[bytes] = []

    class Sink(QuietHandler):
        def do_POST(self) -> None:
            received.append(self.read_body())
            self.answer(200, b"", "application/x-protobuf")

    with serving(Sink) as port:
        done = _cafe("export", str(recorded), f"--otlp=http://127.0.0.1:{port}", "--otlp-protocol", "http/protobuf")
    assert done.returncode == 0, done.stderr
    spans = []
    for body in received:
        request = ExportTraceServiceRequest.FromString(body)
        spans += [span for resource in request.resource_spans for scope in resource.scope_spans
                  for span in scope.spans]
    assert sum(span.name.startswith("chat ") for span in spans) == 2

    page = tmp_path / "page.html"
    assert _cafe("view", str(recorded), "-o", str(page)).returncode == 0
    assert "call 2" in page.read_text()

    golden = tmp_path / "shift.otlp"
    assert _cafe("golden", str(recorded), str(golden), "--update").returncode == 0
    done = _cafe("golden", str(recorded), str(golden))
    assert done.returncode == 0 and "golden OTLP matches" in done.stdout


def test_an_offline_shift_recording_is_version_4_without_exchanges(tmp_path: Path) -> None:
    path = tmp_path / "offline.jsonl"
    assert _cafe("shift", "--record", str(path), "--seed", "7").returncode == 0
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["version"] == 4
    assert not any("exchange" in line for line in lines)


def test_the_page_shows_a_streamed_calls_first_chunk_time(tmp_path: Path) -> None:
    path, page = tmp_path / "stream.jsonl", tmp_path / "stream.html"
    with OpenAIServer.running() as server, wire.record(path):
        client = openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0)
        list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}], stream=True))
    first = json.loads(path.read_text().splitlines()[1])["exchange"]["stream"][0]["offset_ns"]
    assert _cafe("view", str(path), "-o", str(page)).returncode == 0
    from cafe.view.page import format_duration

    assert f"first chunk at {format_duration(first)}" in page.read_text()
