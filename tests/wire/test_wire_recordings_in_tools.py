"""A wire recording in cafe's tools: check-recording, view, export, and a clear refusal
from the café's shift replay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import openai
import pytest

import cafe.wire as wire
from cafe.counter.replay_client import ReplayClient
from cafe.recording.check import check_file
from cafe.recording.errors import RecordingError
from tests.wire.openai_server import OpenAIServer

REPO = Path(__file__).resolve().parents[2]


def _recorded(tmp_path: Path, content: str = "A latte, please.") -> Path:
    path = tmp_path / "wire.jsonl"
    with OpenAIServer.running() as server, wire.record(path):
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test-tools-0123456789abcdef", max_retries=0)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": content}])
        list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": content}], stream=True))
    return path


def test_check_recording_reads_stream_events_as_json(tmp_path: Path) -> None:
    path = _recorded(tmp_path)
    assert check_file(path) == []
    lines = path.read_text().splitlines()
    call = json.loads(lines[2])
    chunk = call["exchange"]["stream"][1]
    event = json.loads(chunk["text"][6:])
    event["choices"][0]["delta"]["content"] = "call me on +44 20 7946 0958"
    chunk["text"] = "data: " + json.dumps(event) + "\n\n"
    lines[2] = json.dumps(call)
    path.write_text("\n".join(lines) + "\n")
    (finding,) = check_file(path)
    assert finding.kind == "phone number" and finding.where == "$.exchange.stream[1].text.data.choices[0].delta.content"


def test_view_and_export_read_a_wire_recording(tmp_path: Path) -> None:
    path = _recorded(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    page, spans = tmp_path / "page.html", tmp_path / "spans.otlp"
    for command in (["view", str(path), "-o", str(page)], ["export", str(path), "--out", str(spans)]):
        done = subprocess.run([sys.executable, "-m", "cafe", *command], env=env, capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 0, done.stderr
    assert page.stat().st_size > 0 and spans.stat().st_size > 0


def test_the_cafe_shift_replay_refuses_a_wire_recording_naming_the_way(tmp_path: Path) -> None:
    path = _recorded(tmp_path)
    with pytest.raises(RecordingError, match=r"wire recording .*cafe\.wire\.replay\(\)"):
        ReplayClient(path)
