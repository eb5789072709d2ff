"""Recording and replaying the wire through the official SDK, with the Python API."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

import cafe.wire as wire
from cafe.recording import load_recording
from cafe.recording.errors import RecordingExhausted, ReplayMismatch, StreamExhausted, UnusedCalls
from tests.wire.openai_server import OpenAIServer

KEY = "sk-test-wire-0123456789abcdefghij"
MESSAGES: Any = [{"role": "user", "content": "A latte, please."}]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer.running() as running:
        yield running


def plain(base_url: str, **extra: Any) -> str | None:
    client = openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0)
    return client.chat.completions.create(model="m", messages=MESSAGES, **extra).choices[0].message.content


def streamed(base_url: str) -> list[str]:
    client = openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0)
    stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True,
                                            stream_options={"include_usage": True})
    return [chunk.model_dump_json() for chunk in stream]


def gathered(base_url: str) -> list[str | None]:
    async def three() -> list[str | None]:
        client = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0)
        replies = await asyncio.gather(*(client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"order {n}"}]) for n in range(3)))
        await client.close()
        return [reply.choices[0].message.content for reply in replies]
    return asyncio.run(three())


def test_a_recording_replays_plain_streamed_and_gathered_calls_with_no_request(
        server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    with wire.record(path):
        live = (plain(server.base_url, max_tokens=5), streamed(server.base_url), gathered(server.base_url))
    assert server.count == 5
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    text = path.read_text()
    assert KEY not in text and "authorization" not in text.lower()
    recording = load_recording(path)
    assert recording.header.version == 2 and len(recording.calls) == 5
    assert recording.calls[0].request["max_tokens"] == 5
    stream = recording.calls[1].exchange["stream"]  # type: ignore[index]
    assert stream[-1]["text"] == "data: [DONE]\n\n" and all(c["offset_ns"] >= 0 for c in stream)
    assert recording.calls[1].response["choices"][0]["message"]["content"] == "".join(
        json.loads(chunk)["choices"][0]["delta"]["content"] or "" for chunk in live[1] if json.loads(chunk)["choices"])
    with wire.replay(path) as source:
        replayed = (plain(server.base_url, max_tokens=5), streamed(server.base_url), gathered(server.base_url))
    assert replayed == live and source.served == 5
    assert server.count == 5


def test_a_changed_field_names_its_path_in_one_line(server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    with wire.record(path):
        plain(server.base_url, max_tokens=5)
    with pytest.raises(ReplayMismatch) as caught, wire.replay(path):
        plain(server.base_url, max_tokens=6)
    line = str(caught.value)
    assert "call 1" in line and "$.max_tokens" in line and "\n" not in line and KEY not in line


def test_a_dropped_call_is_named_and_an_added_one_fails_at_once(server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    with wire.record(path):
        plain(server.base_url)
        plain(server.base_url, max_tokens=3)
    with pytest.raises(UnusedCalls) as caught, wire.replay(path):
        plain(server.base_url)
    assert "from call 2" in str(caught.value) and "POST /v1/chat/completions" in str(caught.value)
    with pytest.raises(RecordingExhausted), wire.replay(path):
        plain(server.base_url)
        plain(server.base_url, max_tokens=3)
        plain(server.base_url)


def test_concurrent_calls_are_each_served_their_own_answer_in_any_order(
        server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "gather.jsonl"
    server.delay(0.05)
    with wire.record(path):
        live = gathered(server.base_url)

    async def reversed_order() -> list[str | None]:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key=KEY, max_retries=0)
        replies = await asyncio.gather(*(client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"order {n}"}]) for n in (2, 0, 1)))
        await client.close()
        return [reply.choices[0].message.content for reply in replies]

    with wire.replay(path):
        replayed = asyncio.run(reversed_order())
    assert replayed == [live[2], live[0], live[1]]


def test_sequential_calls_may_not_swap(server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "two.jsonl"
    with wire.record(path):
        plain(server.base_url, max_tokens=3)
        plain(server.base_url, max_tokens=4)
    with pytest.raises(ReplayMismatch, match=r"call 1: .*\$\.max_tokens"), wire.replay(path):
        plain(server.base_url, max_tokens=4)


def test_a_stream_abandoned_is_recorded_as_read_and_replays_so(server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "early.jsonl"

    def first_two(base_url: str, wanted: int = 2) -> list[str]:
        client = openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0)
        stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        taken = []
        for chunk in stream:
            taken.append(chunk.model_dump_json())
            if len(taken) == wanted:
                break
        stream.close()
        return taken

    server.pause_between_chunks(0.02)
    with wire.record(path):
        live = first_two(server.base_url)
    exchange = load_recording(path).calls[0].exchange
    assert exchange is not None and exchange["outcome"] == "closed_early"
    with wire.replay(path):
        assert first_two(server.base_url) == live
    with pytest.raises(StreamExhausted), wire.replay(path):
        first_two(server.base_url, wanted=100)


def test_an_error_status_replays_as_recorded(server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "limited.jsonl"
    server.fail_next(429)
    with wire.record(path), pytest.raises(openai.RateLimitError):
        plain(server.base_url)
    with wire.replay(path), pytest.raises(openai.RateLimitError) as caught:
        plain(server.base_url)
    assert caught.value.status_code == 429


def test_transports_for_http_client(server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "explicit.jsonl"
    http_client = httpx2.Client(transport=wire.RecordingTransport(path))
    client = openai.OpenAI(base_url=server.base_url, api_key=KEY, http_client=http_client, max_retries=0)
    live = client.chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content
    client.close()
    replaying = wire.ReplayTransport(path)
    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key=KEY, max_retries=0,
                           http_client=httpx2.Client(transport=replaying))
    assert client.chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content == live
    replaying.assert_exhausted()


def test_the_sdk_retry_after_a_refusal_repeats_the_refusal(server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "retry.jsonl"
    with wire.record(path):
        plain(server.base_url)
    client = openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=2)
    with pytest.raises(ReplayMismatch), wire.replay(path) as source:
        client.chat.completions.create(model="other", messages=MESSAGES)
    assert source.served == 0


CREDENTIAL = "Zm9vYmFy" + "QmF6cXV4MTIzNDU2Nzg5MA"


def keyed(base_url: str, query: dict[str, str]) -> str | None:
    client = openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0, default_query=query)
    return client.chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content


@pytest.mark.parametrize(("name", "value"), [
    ("api-key", CREDENTIAL), ("access_token", CREDENTIAL), ("code", CREDENTIAL), ("X-Amz-Signature", CREDENTIAL),
    ("sig", CREDENTIAL), ("key", CREDENTIAL), ("api-key", KEY),  # the last: the bearer key, in the query too
])
def test_a_query_credential_the_recorder_rewrites_replays_from_an_unchanged_program(
        server: OpenAIServer, tmp_path: Path, name: str, value: str) -> None:
    server.require_query(name, value)
    query = {"api-version": "2024-10-21", name: value}
    path = tmp_path / "keyed.jsonl"
    with wire.record(path):
        live = keyed(server.base_url, query)
    assert value not in path.read_text(encoding="utf-8")
    with wire.replay(path) as source:
        assert keyed(server.base_url, query) == live
    assert source.served == 1 and server.count == 1
    with pytest.raises(ReplayMismatch, match="at the query"), wire.replay(path):
        keyed(server.base_url, {**query, "api-version": "2025-01-01"})


def transcribe(base_url: str, audio: bytes = b"RIFF\x24\x00\x00\x00WAVEfmt \xff\xfe\x00",
               prompt: str = "A latte order.", filename: str = "order.wav") -> str:
    client = openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0)
    return client.audio.transcriptions.create(model="whisper-1", file=(filename, audio, "audio/wav"),
                                              prompt=prompt).text


def test_a_multipart_upload_replays_though_its_boundary_is_random(server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "upload.jsonl"
    with wire.record(path):
        live = transcribe(server.base_url)
    with wire.replay(path) as source:
        assert transcribe(server.base_url) == live
    assert source.served == 1 and server.count == 1


@pytest.mark.parametrize(("changed", "where"), [
    ({"audio": b"RIFF\x24\x00\x00\x00WAVEfmt \xff\xfe\x01"}, "the multipart part 'file' (its content)"),
    ({"prompt": "A mocha order."}, "the multipart part 'prompt' (its content)"),
    ({"filename": "mocha.wav"}, "the multipart part 'file' (its filename)"),
])
def test_a_changed_upload_part_fails_naming_the_part_without_its_content(
        server: OpenAIServer, tmp_path: Path, changed: dict[str, Any], where: str) -> None:
    path = tmp_path / "upload.jsonl"
    with wire.record(path):
        transcribe(server.base_url)
    with pytest.raises(ReplayMismatch) as caught, wire.replay(path):
        transcribe(server.base_url, **changed)
    line = str(caught.value)
    assert line.startswith(f"{path}: call 1: the request differs from the recording at {where}: recorded ")
    assert "\n" not in line and "WAVE" not in line and "order" not in line and "mocha" not in line
    assert "sha256" in line or "chars" in line


def test_a_recorded_query_marker_written_percent_encoded_still_replays(server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "keyed.jsonl"
    with wire.record(path):
        live = keyed(server.base_url, {"key": CREDENTIAL})
    text = path.read_text(encoding="utf-8")
    assert "?key=[REDACTED]" in text
    path.write_text(text.replace("?key=[REDACTED]", "?key=%5BREDACTED%5D"), encoding="utf-8")
    with wire.replay(path) as source:
        assert keyed(server.base_url, {"key": CREDENTIAL}) == live
    assert source.served == 1
