"""`WireRecorder`'s bookkeeping: each call's line is on disk once the call ends, numbered by
its start, and the committed recording is in start order; a call whose line cannot be
written fails the recording, naming it, and loses nothing recorded."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest

import cafe.wire as wire
from cafe.recording import load_recording
from cafe.recording.errors import RecordingError
from cafe.recording.format import MAX_LINE_BYTES, UNORDERED_WIRE_VERSION, WIRE_VERSION
from cafe.recording.writer import partial_path
from tests.wire.openai_server import OpenAIServer

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-test-recorder-0123456789abcdef"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer.running() as running:
        yield running


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _asked(line: dict[str, Any]) -> str:
    return str(line["request"]["messages"][-1]["content"])


def _client(server: OpenAIServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0)


def _ask(client: openai.OpenAI, text: str) -> str | None:
    return client.chat.completions.create(model="m", messages=[{"role": "user", "content": text}]
                                          ).choices[0].message.content


# A program killed outright (SIGKILL) while a stream is open: the calls that ended while it was
# open are in REC.partial, numbered by their start, and the partial is read, drawn and replayed.

AGENT = '''
import os
import signal

import openai

client = openai.OpenAI(base_url=os.environ["AGENT_BASE_URL"], api_key=os.environ["AGENT_KEY"], max_retries=0)
if not os.environ.get("AGENT_NO_STREAM"):
    stream = client.chat.completions.create(model="m", stream=True,
                                            messages=[{"role": "user", "content": "A long story, please."}])
    next(iter(stream))
for n in range(2):
    reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"A latte, #{n}."}])
    print("plain:", reply.choices[0].message.content, flush=True)
if os.environ.get("AGENT_KILL"):
    os.kill(os.getpid(), signal.SIGKILL)
'''


def _cafe(tmp_path: Path, *arguments: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {key: value for key, value in os.environ.items() if not key.startswith(("CAFE_", "OPENAI_"))}
    environ.update({"PYTHONPATH": str(REPO), "AGENT_KEY": KEY}, **env)
    return subprocess.run([sys.executable, "-m", "cafe", *arguments], env=environ, capture_output=True, text=True,
                          timeout=180, check=False, cwd=tmp_path)


def test_a_program_killed_while_a_stream_is_open_keeps_every_call_that_ended(tmp_path: Path) -> None:
    agent, recording = tmp_path / "agent.py", tmp_path / "agent.jsonl"
    agent.write_text(AGENT)
    program = ["--", sys.executable, str(agent)]
    with OpenAIServer.running() as server:
        server.pause_between_chunks(0.05)  # the stream is still open when the program dies
        killed = _cafe(tmp_path, "record", str(recording), *program, AGENT_BASE_URL=server.base_url, AGENT_KILL="1")
        url = server.base_url
    assert killed.returncode == 128 + 9, killed.stderr
    assert not recording.exists()
    partial = partial_path(recording)
    lines = _lines(partial)
    assert lines[0]["version"] == UNORDERED_WIRE_VERSION
    assert [(line["call"], _asked(line)) for line in lines[1:]] == [(2, "A latte, #0."), (3, "A latte, #1.")]

    loaded = load_recording(partial, allow_truncated=True)
    assert [call.index for call in loaded.calls] == [2, 3]
    page = tmp_path / "page.html"
    drawn = _cafe(tmp_path, "view", str(partial), "-o", str(page))
    assert drawn.returncode == 0, drawn.stderr
    assert "call 2" in page.read_text(encoding="utf-8") and "call 3" in page.read_text(encoding="utf-8")

    # The calls that ended replay; the stream that never ended is named as holding no answer.
    replayed = _cafe(tmp_path, "replay-run", "--allow-truncated", str(partial), *program, AGENT_BASE_URL=url,
                     AGENT_NO_STREAM="1")
    assert replayed.returncode == 0, replayed.stderr
    unended = _cafe(tmp_path, "replay-run", "--allow-truncated", str(partial), *program, AGENT_BASE_URL=url)
    assert unended.returncode == 43, unended.stderr
    assert unended.stderr.strip().splitlines()[-1] == (
        f"cafe: error: {partial}: call 1 was made, but the recording holds no answer for it (an unfinished "
        "recording: its recorder stopped before the call ended, or could not write its line)")


def test_a_call_is_on_disk_once_it_ends_and_the_recording_is_committed_in_start_order(
        server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    client = _client(server)
    with wire.record(path):
        stream = client.chat.completions.create(model="m", stream=True,
                                                messages=[{"role": "user", "content": "A long story, please."}])
        first = next(iter(stream))
        assert _ask(client, "A latte.")
        # The plain call ended while the stream is open: its line is written, numbered 2.
        during = _lines(partial_path(path))
        assert during[0]["version"] == UNORDERED_WIRE_VERSION
        assert [(line["call"], _asked(line)) for line in during[1:]] == [(2, "A latte.")]
        rest = list(stream)
    lines = _lines(path)
    assert lines[0]["version"] == WIRE_VERSION
    assert [(line["call"], _asked(line)) for line in lines[1:]] == [(1, "A long story, please."), (2, "A latte.")]
    assert not partial_path(path).exists()
    assert [p.name for p in tmp_path.iterdir()] == ["agent.jsonl"]  # nothing left from putting it in order

    with wire.replay(path):
        stream = client.chat.completions.create(model="m", stream=True,
                                                messages=[{"role": "user", "content": "A long story, please."}])
        assert next(iter(stream)) == first
        assert _ask(client, "A latte.")
        assert list(stream) == rest


def test_calls_that_end_in_start_order_are_written_as_a_version_2_recording_throughout(
        server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    client = _client(server)
    with wire.record(path):
        _ask(client, "A latte.")
        _ask(client, "A tea.")
        assert _lines(partial_path(path))[0]["version"] == WIRE_VERSION
    assert [line["call"] for line in _lines(path)[1:]] == [1, 2]


# A call whose line cannot be written (longer than a recording's line may be): that call fails,
# naming itself, the recording is not completed, and every call recorded is kept.

def test_a_call_too_large_to_record_fails_the_recording_and_keeps_the_others(
        server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    partial = partial_path(path)
    client = _client(server)
    huge = "x" * (MAX_LINE_BYTES + 1)
    with pytest.raises(RecordingError) as caught, wire.record(path):
        assert _ask(client, "A latte.")
        with pytest.raises(RecordingError) as refused:  # the call itself fails, naming itself
            _ask(client, huge)
        assert str(refused.value).startswith(
            f"{path}: call 2 (POST /v1/chat/completions) cannot be recorded: its line would be ")
        assert _ask(client, "A tea.")
    said = str(caught.value)
    assert "\n" not in said
    assert said.startswith(f"{path}: call 2 (POST /v1/chat/completions) cannot be recorded: its line would be ")
    assert f"longer than a recording's line may be (at most {MAX_LINE_BYTES} bytes)" in said
    assert said.endswith(f"so the recording is incomplete and {path} was not written; the 2 call(s) recorded "
                         f"are kept in {partial}")
    assert not path.exists()
    kept = load_recording(partial)
    assert [(call.index, call.request["messages"][0]["content"]) for call in kept.calls] == [
        (1, "A latte."), (3, "A tea.")]


HUGE_AGENT = """
import os

import openai

client = openai.OpenAI(base_url=os.environ["AGENT_BASE_URL"], api_key=os.environ["AGENT_KEY"], max_retries=0)
for content in ("A latte.", "x" * SIZE):
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": content}])
"""


def test_cafe_record_of_a_call_too_large_to_record_fails_in_one_line(tmp_path: Path) -> None:
    agent, recording = tmp_path / "agent.py", tmp_path / "agent.jsonl"
    agent.write_text(HUGE_AGENT.replace("SIZE", str(MAX_LINE_BYTES)))
    with OpenAIServer.running() as server:
        done = _cafe(tmp_path, "record", str(recording), "--", sys.executable, str(agent),
                     AGENT_BASE_URL=server.base_url)
    assert done.returncode == 30, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("cafe: error: ") and "call 2 (POST /v1/chat/completions) cannot be recorded" in last
    assert "recorded" not in done.stdout
    assert not recording.exists()
    # The calls that were recorded are kept where the line says, beside the recording.
    partial = recording.with_name(recording.name + ".partial")
    assert str(partial) in last and partial.exists()
    assert len(partial.read_text(encoding="utf-8").splitlines()) >= 2  # the header and call 1
    assert not list(tmp_path.glob(".cafe-run-*"))
