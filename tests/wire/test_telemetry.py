"""An SDK's upload of its own telemetry (the OpenAI Agents SDK's trace export) is not a model
call: the recorder keeps none, and a replay answers each as the service does, without the
network, so the program neither breaks nor reaches out."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import openai
import orjson
import pytest

import cafe.wire as wire
from cafe.recording.format import WIRE_VERSION, Header, Timing
from cafe.recording.writer import RecordingWriter
from tests.wire.openai_server import OpenAIServer

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-test-telemetry-0123456789abcdef"

# The Agents SDK traces every run and exports the traces, by default to the OpenAI service's
# ingest endpoint. Recording, the test points that export at the local server (no test may
# reach another host); replaying, the program keeps the SDK's default endpoint.
AGENT = '''
import os

from agents import Agent, Runner, set_default_openai_api, set_default_openai_client, set_trace_processors
from agents.tracing.processors import BackendSpanExporter, BatchTraceProcessor
from openai import AsyncOpenAI

set_default_openai_api("chat_completions")
set_default_openai_client(AsyncOpenAI(base_url=os.environ["AGENT_BASE_URL"], max_retries=0))
if os.environ.get("AGENT_TRACES_URL"):
    set_trace_processors([BatchTraceProcessor(BackendSpanExporter(endpoint=os.environ["AGENT_TRACES_URL"]))])
barista = Agent(name="barista", instructions="Take the order.", model="gpt-4o-mini")
print("final:", Runner.run_sync(barista, "A latte, please.").final_output, flush=True)
'''


def _cafe(tmp_path: Path, *arguments: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {key: value for key, value in os.environ.items() if not key.startswith(("CAFE_", "OPENAI_"))}
    environ.update({"PYTHONPATH": str(REPO), "OPENAI_API_KEY": KEY}, **env)
    return subprocess.run([sys.executable, "-m", "cafe", *arguments], env=environ, capture_output=True, text=True,
                          timeout=180, check=False, cwd=tmp_path)


def _targets(path: Path) -> list[str]:
    return [orjson.loads(line)["exchange"]["target"] for line in path.read_bytes().splitlines()[1:]]


def test_an_agents_sdk_program_replays_with_its_trace_export_answered_offline(tmp_path: Path) -> None:
    pytest.importorskip("agents")  # openai-agents, in the test extra
    agent, recording = tmp_path / "agent.py", tmp_path / "agent.jsonl"
    agent.write_text(AGENT)
    program = ["--", sys.executable, str(agent)]
    with OpenAIServer.running() as server:
        live = _cafe(tmp_path, "record", str(recording), *program, AGENT_BASE_URL=server.base_url,
                     AGENT_TRACES_URL=f"{server.base_url}/traces/ingest")
        assert live.returncode == 0, live.stderr
        uploads = [received for received in server.received if received.path == "/v1/traces/ingest"]
        url = server.base_url
    assert uploads, "the Agents SDK exported no traces"  # they reached the service while recording
    assert _targets(recording) == ["/v1/chat/completions"]

    replayed = _cafe(tmp_path, "replay-run", str(recording), *program, AGENT_BASE_URL=url)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout.startswith(live.stdout.splitlines()[0])
    assert "Tracing" not in replayed.stderr  # the SDK's exporter logs any export it could not make


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer.running() as running:
        yield running


def _trace_upload(client: httpx2.Client, url: str) -> httpx2.Response:
    return client.post(url, json={"data": [{"object": "trace", "id": "trace_0123"}]},
                       headers={"Authorization": f"Bearer {KEY}", "OpenAI-Beta": "traces=v1"})


def test_a_trace_upload_is_sent_but_not_recorded(server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    client = openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0)
    with wire.record(path) as recorder, httpx2.Client() as uploads:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "A latte."}])
        assert _trace_upload(uploads, f"{server.base_url}/traces/ingest?beta=1").status_code == 204
    assert [received.path for received in server.received] == ["/v1/chat/completions", "/v1/traces/ingest?beta=1"]
    assert recorder.calls == 1 and _targets(path) == ["/v1/chat/completions"]


def test_a_replay_answers_a_trace_upload_as_the_service_does_without_the_network(
        server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    client = openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0)
    with wire.record(path):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "A latte."}])
    with wire.replay(path) as source, httpx2.Client() as uploads:
        answered = _trace_upload(uploads, "https://api.openai.com/v1/traces/ingest")
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "A latte."}])
        again = _trace_upload(uploads, f"{server.base_url}/traces/ingest")
    assert (answered.status_code, answered.content, again.status_code) == (204, b"", 204)
    assert source.served == 1 and server.count == 1  # the recording's call only, and nothing reached the server


def test_a_trace_upload_an_earlier_recorder_kept_is_no_call_to_make(server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    client = openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0)
    with wire.record(path):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "A latte."}])
    recorded = orjson.loads(path.read_bytes().splitlines()[1])
    kept = tmp_path / "kept.jsonl"
    writer = RecordingWriter(kept, Header(version=WIRE_VERSION))
    start = recorded["timing"]["start_unix_nano"]
    writer.write_call({"data": [{"id": "trace_0123"}]}, None, Timing(start - 10, 5),
                      {**recorded["exchange"], "target": "/v1/traces/ingest", "status": 204})
    writer.write_call(recorded["request"], recorded["response"], Timing(start, 5), recorded["exchange"])
    writer.commit()
    with wire.replay(kept) as source:
        reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "A latte."}])
    assert reply.choices[0].message.content and source.served == 1 and source.unused == 0
