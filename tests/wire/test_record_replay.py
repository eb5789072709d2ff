"""Recording and replaying the wire through the official SDK, with the Python API, on the
library the installed SDK sends through (httpx2 for openai 3.x, httpx for 1.x)."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

import cafe.wire as wire
from cafe.recording import load_recording
from cafe.recording.errors import (
    OtherProcessCall,
    RecordingExhausted,
    ReplayMismatch,
    StreamExhausted,
    UnusedCalls,
)
from cafe.wire._hook import HOOK_VARIABLE
from tests.wire.libraries import SDK_HTTP, SDK_TRANSPORTS
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
    http_client = SDK_HTTP.Client(transport=SDK_TRANSPORTS.RecordingTransport(path))
    client = openai.OpenAI(base_url=server.base_url, api_key=KEY, http_client=http_client, max_retries=0)
    live = client.chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content
    client.close()
    replaying = SDK_TRANSPORTS.ReplayTransport(path)
    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key=KEY, max_retries=0,
                           http_client=SDK_HTTP.Client(transport=replaying))
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


# A forked child's exit status: its call was refused (and leaving the block raised nothing
# but that refusal), it was answered, or something else went wrong.
REFUSED, ANSWERED, OTHERWISE = 1, 2, 3


def _child_status(child: int) -> int:
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status)


def _outcome(call: Any) -> int:
    try:
        call()
    except BaseException as error:
        return _refused(error)
    return ANSWERED


def _refused(error: BaseException | None) -> int:
    while error is not None and not isinstance(error, OtherProcessCall):
        error = error.__cause__ or error.__context__
    return REFUSED if error is not None else OTHERWISE


def test_a_forked_childs_call_is_refused_and_its_exit_leaves_the_parents_recording_alone(
        server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "forked.jsonl"
    child, code = -1, OTHERWISE
    try:
        with wire.record(path):
            plain(server.base_url, max_tokens=3)
            child = os.fork()
            if child == 0:  # ... and then leaves the block as its parent will: the recording is not its own
                code = _outcome(lambda: plain(server.base_url, max_tokens=4))
            else:
                assert _child_status(child) == REFUSED
                plain(server.base_url, max_tokens=5)
    except BaseException:
        if child != 0:
            raise
        code = OTHERWISE
    finally:
        if child == 0:
            os._exit(code)
    assert server.count == 2  # the child's call was never sent
    recording = load_recording(path)
    assert [call.index for call in recording.calls] == [1, 2]
    assert [call.request["max_tokens"] for call in recording.calls] == [3, 5]
    assert not path.with_name(path.name + ".partial").exists()


def test_a_forked_childs_call_in_a_replay_is_refused_without_reaching_the_server(
        server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "forked.jsonl"
    with wire.record(path):
        live = [plain(server.base_url, max_tokens=3), plain(server.base_url, max_tokens=5)]
    before = server.count
    child, code = -1, OTHERWISE
    try:
        with wire.replay(path) as source:
            replayed = [plain(server.base_url, max_tokens=3)]
            child = os.fork()
            if child == 0:
                code = _outcome(lambda: plain(server.base_url, max_tokens=5))
            else:
                assert _child_status(child) == REFUSED
                replayed.append(plain(server.base_url, max_tokens=5))
    except BaseException as error:
        if child != 0:
            raise
        code = code if _refused(error) == REFUSED else OTHERWISE  # the child's block ends on its refusal
    finally:
        if child == 0:
            os._exit(code)
    assert replayed == live
    assert source.served == 2
    assert server.count == before


# A Python started inside the block: it calls the server, and says how that ended.
STARTED = """
import sys

import openai

client = openai.OpenAI(base_url=sys.argv[1], api_key=sys.argv[2], max_retries=0)
try:
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "And one for me."}])
    print("answered")
except Exception as error:
    cause = error  # an SDK may wrap the refusal (openai 1.x: APIConnectionError from it)
    while cause is not None and type(cause).__name__ != "OtherProcessCall":
        cause = cause.__cause__ or cause.__context__
    print("refused" if cause is not None else f"failed: {type(error).__name__}")
"""


def _started_python(base_url: str, *flags: str) -> str:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, *flags, "-c", STARTED, base_url, KEY], capture_output=True, text=True,
                          timeout=120, check=False)
    return done.stdout.strip() or done.stderr[-500:]


@pytest.mark.parametrize("flags", [(), ("-I",)], ids=["plain", "isolated"])
def test_a_python_started_in_a_replay_is_refused_without_reaching_the_server(
        server: OpenAIServer, tmp_path: Path, flags: tuple[str, ...]) -> None:
    path = tmp_path / "started.jsonl"
    with wire.record(path):
        plain(server.base_url)
    before = server.count
    with pytest.raises(OtherProcessCall) as refused, wire.replay(path):
        plain(server.base_url)
        assert _started_python(server.base_url, *flags) == "refused"
    assert server.count == before
    assert str(refused.value).startswith(f"{path}: a model call from process ")
    assert HOOK_VARIABLE not in os.environ  # the block's mark is gone with it
    assert _started_python(server.base_url) == "answered"


def test_a_python_started_in_a_recording_is_refused_and_the_block_keeps_the_calls_made(
        server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "started.jsonl"
    with pytest.raises(OtherProcessCall), wire.record(path):
        plain(server.base_url)
        assert _started_python(server.base_url) == "refused"
    assert server.count == 1
    assert not path.exists()
    assert [call.index for call in load_recording(path.with_name(path.name + ".partial")).calls] == [1]


def test_a_relative_recording_is_made_where_it_was_named_when_the_block_changes_directory(
        server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(tmp_path)
    with wire.record("relative.jsonl"):
        os.chdir(elsewhere)
        live = plain(server.base_url)
    os.chdir(tmp_path)
    with wire.replay("relative.jsonl"):
        os.chdir(elsewhere)
        assert plain(server.base_url) == live
    assert [call.index for call in load_recording(tmp_path / "relative.jsonl").calls] == [1]
    assert list(elsewhere.iterdir()) == []


def test_a_dropped_responses_call_is_named_by_its_input_without_its_text(tmp_path: Path) -> None:
    from tests.wire.responses_server import ResponsesServer

    path = tmp_path / "agent.jsonl"
    secret = "my card number is 4111 1111 1111 1111"

    def calls(base_url: str, count: int) -> None:
        client = openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0)
        first = client.responses.create(model="gpt-4.1", input=secret)
        if count == 2:
            client.responses.create(model="gpt-4.1", previous_response_id=first.id,
                                    input=[{"role": "user", "content": secret}, {"role": "user", "content": "thanks"}])

    with ResponsesServer.running() as server:
        with wire.record(path):
            calls(server.base_url, 2)
        with pytest.raises(UnusedCalls) as caught, wire.replay(path):
            calls(server.base_url, 1)
    line = str(caught.value)
    assert "from call 2" in line and "\n" not in line and "4111" not in line and "thanks" not in line
    assert "POST /v1/responses, 2 input item(s), the last from user, after a previous response" in line
