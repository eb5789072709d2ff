"""What `WireRecorder` writes is scrubbed: the request's own credentials wherever they appear
(in either body, raw, JSON-escaped or spelled with needless escapes) and the secret patterns,
whichever of the two the recorder or the writer catches; a stream as one text however its
chunks cut a secret, a body kept as bytes (a binary answer, an upload) read as bytes, and a
query's credentials whatever their names."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

import cafe.wire as wire
from cafe.privacy import Scrubber
from cafe.recording.errors import ReplayMismatch
from cafe.wire import CallOutcome, ObservedTransport, WireRecorder, WireRequest, WireResponse
from tests.wire.openai_server import OpenAIServer

# No pattern keyword in it: only the request's own credentials can catch it.
KEY = "Zq7pW2mX9vR4tL8nB3cY"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def record(tmp_path: Path, content: str, echoed: str) -> str:
    """One SDK call whose message is `content`, answered with `echoed`: the recording's text."""
    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json={
            "id": "c1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": echoed}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    path = tmp_path / "wire.jsonl"
    recorder = WireRecorder(path, mode="all")
    http_client = httpx2.Client(transport=ObservedTransport(httpx2.MockTransport(answer), [recorder]))
    client = openai.OpenAI(api_key=KEY, base_url="http://wire.invalid/v1", max_retries=0, http_client=http_client)
    messages: Any = [{"role": "user", "content": content}]
    client.chat.completions.create(model="m", messages=messages)
    recorder.close()
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("content", [
    f"my key is {KEY}",
    json.dumps({"api": KEY}),  # JSON inside a string: the key escaped once more
    "needless escapes: \\u005a" + KEY[1:],  # the key spelled with a `\u005a` for its `Z`
    "café, " + KEY,  # a line with non-ASCII text
])
def test_the_requests_own_key_is_scrubbed_from_request_and_response(tmp_path: Path, content: str) -> None:
    text = record(tmp_path, content, echoed=f"you said {content}")
    assert KEY not in text
    assert KEY[1:] not in text
    call = json.loads(text.splitlines()[1])
    assert "[REDACTED]" in call["request"]["messages"][0]["content"]
    assert "[REDACTED]" in call["response"]["choices"][0]["message"]["content"]


def test_a_pattern_secret_is_scrubbed_from_a_line_without_the_key(tmp_path: Path) -> None:
    text = record(tmp_path, f"token {GITHUB_TOKEN}", echoed=f"noted {GITHUB_TOKEN}")
    assert GITHUB_TOKEN not in text
    assert text.count("[REDACTED]") >= 2


def test_a_line_without_secrets_is_kept_as_sent(tmp_path: Path) -> None:
    text = record(tmp_path, "A flat white, please.", echoed="Coming up.")
    call = json.loads(text.splitlines()[1])
    assert call["request"]["messages"] == [{"role": "user", "content": "A flat white, please."}]
    assert call["response"]["choices"][0]["message"]["content"] == "Coming up."
    assert "[REDACTED]" not in text


# --- a stream is scrubbed as one text, however it is cut ----------------------------------

LEAK = "sk-" + "proj-" + "Kq72Zx9Wm4Rt8Yp3Ln6Bv1Cs5Df0Gh2"
SDK_KEY = "sk-test-scrub-0123456789abcdefghij"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer.running() as running:
        yield running


def _hidden(secret: str, text: str) -> bool:
    """No telling run of the secret is in `text`: past its family's prefix, nor its end."""
    body = secret.split("_", 1)[1] if secret.startswith("ghp_") else secret[8:]
    return body[:10] not in text and secret[-10:] not in text


def _events(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The JSON events of a recorded stream, read from its chunks joined."""
    joined = "".join(chunk["text"] for chunk in chunks)
    found = []
    for block in joined.split("\n\n"):
        data = [line[6:] for line in block.splitlines() if line.startswith("data: ")]
        if data and data[0] != "[DONE]":
            found.append(json.loads(data[0]))
    return found


def _streamed_text(event: dict[str, Any]) -> str:
    """What a streamed event adds to the reply or to a tool call's arguments, in the three
    APIs' shapes: Chat Completions, the Responses API, Anthropic's Messages."""
    if "choices" in event:
        said = ""
        for choice in event["choices"]:
            delta = choice.get("delta") or {}
            said += delta.get("content") or ""
            said += "".join(call["function"].get("arguments") or "" for call in delta.get("tool_calls") or [])
        return said
    if event.get("type", "").endswith(".delta") and isinstance(event.get("delta"), str):
        return str(event["delta"])
    if event.get("type") == "content_block_delta":
        return str(event["delta"].get("text") or event["delta"].get("partial_json") or "")
    return ""


def _chat(server: OpenAIServer) -> list[str]:
    client = openai.OpenAI(base_url=server.base_url, api_key=SDK_KEY, max_retries=0)
    said = []
    for chunk in client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True):
        for choice in chunk.choices:
            said.append(choice.delta.content or "")
            said += [call.function.arguments or "" for call in choice.delta.tool_calls or [] if call.function]
    return said


def _responses(server: OpenAIServer) -> list[str]:
    client = openai.OpenAI(base_url=server.base_url, api_key=SDK_KEY, max_retries=0)
    return [str(getattr(event, "delta", "")) for event in client.responses.create(model="m", input="hi", stream=True)]


def _messages(server: OpenAIServer) -> list[str]:
    # Anthropic's Messages API, by a client of its own on httpx2.
    with httpx2.Client() as client, client.stream("POST", server.base_url + "/messages", json={
            "model": "claude-x", "max_tokens": 64, "stream": True,
            "messages": [{"role": "user", "content": "hi"}]}) as reply:
        return list(reply.iter_raw())


@pytest.mark.parametrize("api", [_chat, _responses, _messages], ids=["chat", "responses", "messages"])
def test_a_key_streamed_token_by_token_is_scrubbed_in_the_recorded_stream(
        server: OpenAIServer, tmp_path: Path, api: Any) -> None:
    server.answer_with(f"Your key is {LEAK}, keep it.", token_chars=3,
                       tool_arguments=json.dumps({"note": f"token {GITHUB_TOKEN}"}))
    path = tmp_path / "stream.jsonl"
    with wire.record(path):
        live = api(server)
    text = path.read_text(encoding="utf-8")
    exchange = json.loads(text.splitlines()[1])["exchange"]
    streamed = "".join(_streamed_text(event) for event in _events(exchange["stream"]))
    assert _hidden(LEAK, streamed) and _hidden(GITHUB_TOKEN, streamed)
    assert _hidden(LEAK, text) and _hidden(GITHUB_TOKEN, text)
    assert "Your key is [REDACTED]" in streamed and streamed.endswith("}")
    count = server.count
    with wire.replay(path):
        again = api(server)
    assert server.count == count
    assert len(again) == len(live)  # chunk for chunk: the redacted pieces are still there
    if api is not _messages:
        assert "".join(again) == streamed
        assert [said for said in again if "[REDACTED]" not in said] == [
            said for said, before in zip(live, again, strict=True) if "[REDACTED]" not in before]


def test_a_key_split_across_reads_and_events_is_scrubbed_in_the_recorded_stream(
        server: OpenAIServer, tmp_path: Path) -> None:
    server.answer_with(f"Use {LEAK} here.", token_chars=12)
    server.split_events(3)  # every event in three writes, a pause after each: read in pieces
    server.pause_between_chunks(0.002)
    path = tmp_path / "reads.jsonl"
    with wire.record(path):
        live = _chat(server)
    text = path.read_text(encoding="utf-8")
    assert _hidden(LEAK, text)
    stream = json.loads(text.splitlines()[1])["exchange"]["stream"]
    assert "".join(_streamed_text(event) for event in _events(stream)).startswith("Use [REDACTED]")
    with wire.replay(path):
        assert len(_chat(server)) == len(live)


def _recorded_stream(tmp_path: Path, chunks: list[bytes], scrubber: Scrubber | None = None) -> list[dict[str, Any]]:
    """The stream a `WireRecorder` writes of a call that read these chunks, 10 ns apart."""
    path = tmp_path / "chunks.jsonl"
    path.unlink(missing_ok=True)
    recorder = WireRecorder(path, mode="all", scrubber=scrubber)
    request = WireRequest("POST", "http", "api.invalid", None, "/v1/chat/completions",
                          (("content-type", "application/json"),), b'{"model": "m", "stream": true}', 0)
    call = recorder.start(request)
    call.response(WireResponse(200, (("content-type", "text/event-stream"),), 1))
    for position, chunk in enumerate(chunks):
        call.chunk(chunk, 10 * (position + 1))
    call.end(CallOutcome.completed(10 * (len(chunks) + 1)))
    recorder.close()
    stream: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8").splitlines()[1])["exchange"]["stream"]
    return stream


def _chunk_event(content: str, index: int = 0) -> bytes:
    event = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": index, "delta": {"content": content}, "finish_reason": None}]}
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def test_a_key_is_scrubbed_from_the_stream_wherever_a_read_cuts_it(tmp_path: Path) -> None:
    # Two choices interleaved, the key in choice 0 cut across three events, and every place a
    # read could end: the chunks stay as many, at their offsets, each event still JSON.
    data = b"".join([_chunk_event("key: " + LEAK[:9]), _chunk_event("unrelated", 1), _chunk_event(LEAK[9:20]),
                     _chunk_event("sk-", 1), _chunk_event(LEAK[20:] + " end"), b"data: [DONE]\n\n"])
    for cut in range(1, len(data)):
        stream = _recorded_stream(tmp_path, [data[:cut], data[cut:]])
        assert [chunk["offset_ns"] for chunk in stream] == [10, 20]
        events = _events(stream)
        assert len(events) == 5
        said = "".join(_streamed_text(event) for event in events if event["choices"][0]["index"] == 0)
        assert _hidden(LEAK, said) and said.startswith("key: [REDACTED]") and said.endswith(" end"), cut


def test_a_stream_without_a_secret_is_recorded_byte_for_byte(tmp_path: Path) -> None:
    chunks = [_chunk_event("A flat "), _chunk_event("white, "), _chunk_event("sk-"), b"data: [DONE]\n\n"]
    assert [chunk["text"].encode() for chunk in _recorded_stream(tmp_path, chunks)] == chunks


def test_the_requests_own_key_split_across_events_is_scrubbed(tmp_path: Path) -> None:
    # No pattern knows this key: only the request's credentials, joined across events, catch it.
    chunks = [_chunk_event("echo " + KEY[:7]), _chunk_event(KEY[7:]), b"data: [DONE]\n\n"]
    stream = _recorded_stream(tmp_path, chunks, Scrubber().with_literals([KEY]))
    said = "".join(_streamed_text(event) for event in _events(stream))
    assert said == "echo [REDACTED][REDACTED]"


# --- bodies kept as bytes ------------------------------------------------------------------


def _exchange(path: Path, call: int = 1) -> dict[str, Any]:
    exchange: dict[str, Any] = json.loads(path.read_text(encoding="utf-8").splitlines()[call])["exchange"]
    return exchange


def test_a_binary_answer_is_scrubbed_of_the_secrets_in_its_bytes(server: OpenAIServer, tmp_path: Path) -> None:
    audio = b"ID3\x03\x00\xff\xfb\x90 " + LEAK.encode() + b" \x00\xfe " + GITHUB_TOKEN.encode() + b"\xff\x00"
    server.speak(audio)
    client = openai.OpenAI(base_url=server.base_url, api_key=SDK_KEY, max_retries=0)
    path = tmp_path / "speech.jsonl"
    with wire.record(path):
        assert client.audio.speech.create(model="tts-1", voice="alloy", input="Hello.").content == audio
    kept = base64.b64decode(_exchange(path)["body"]["base64"])
    assert kept == audio.replace(LEAK.encode(), b"[REDACTED]").replace(GITHUB_TOKEN.encode(), b"[REDACTED]")
    with wire.replay(path):
        assert client.audio.speech.create(model="tts-1", voice="alloy", input="Hello.").content == kept


def test_an_upload_is_scrubbed_part_by_part(server: OpenAIServer, tmp_path: Path) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key=SDK_KEY, max_retries=0)
    upload = b"RIFF\x24\x00\xff\xfeWAVE " + LEAK.encode() + b"\x00\x81"
    path = tmp_path / "upload.jsonl"
    with wire.record(path):
        client.audio.transcriptions.create(model="whisper-1", file=("order.wav", upload, "audio/wav"),
                                           prompt=f"the till's token is {GITHUB_TOKEN}",
                                           extra_body={"api_key": KEY, "max_tokens": 5})
    text = path.read_text(encoding="utf-8")
    body = base64.b64decode(_exchange(path)["request_body"]["base64"])
    assert _hidden(LEAK, text) and _hidden(GITHUB_TOKEN, text) and KEY not in text
    assert LEAK.encode() not in body and GITHUB_TOKEN.encode() not in body and KEY.encode() not in body
    assert b"WAVE [REDACTED]\x00\x81" in body and b"the till's token is [REDACTED]" in body
    assert b'name="api_key"\r\n\r\n[REDACTED]\r\n' in body
    # What the request asks for is kept, though a name holds a key word.
    assert b'name="model"\r\n\r\nwhisper-1\r\n' in body and b'name="max_tokens"\r\n\r\n5\r\n' in body


def test_an_answer_in_a_chain_of_encodings_is_decoded_and_scrubbed(server: OpenAIServer, tmp_path: Path) -> None:
    server.encode_answers("deflate, gzip")
    server.answer_with(f"Here: {LEAK}")
    path = tmp_path / "encoded.jsonl"
    with wire.record(path):
        client = openai.OpenAI(base_url=server.base_url, api_key=SDK_KEY, max_retries=0)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    line = json.loads(path.read_text(encoding="utf-8").splitlines()[1])
    assert line["response"]["choices"][0]["message"]["content"] == "Here: [REDACTED]"
    assert "content-encoding" not in line["exchange"]["response_headers"] and line["exchange"]["body"] is None


# --- query credentials -----------------------------------------------------------------------

QUERY_CREDENTIALS = ["api-key", "access_token", "code", "sig", "signature", "X-Amz-Signature", "X-Amz-Credential",
                     "X-Amz-Security-Token", "X-Goog-Signature", "X-Goog-Credential", "Signature", "Policy",
                     "Key-Pair-Id", "client_secret", "key", "hmac"]


@pytest.mark.parametrize("name", QUERY_CREDENTIALS)
def test_a_query_credential_is_never_recorded_whatever_its_name(
        server: OpenAIServer, tmp_path: Path, name: str) -> None:
    value = "Zm9vYmFy" + "QmF6cXV4MTIzNDU2Nzg5MA"
    client = openai.OpenAI(base_url=server.base_url, api_key=SDK_KEY, max_retries=0,
                           default_query={name: value, "api-version": "2024-10-21"})
    path = tmp_path / "query.jsonl"
    with wire.record(path):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert f"?{name}={value}&" in server.received[0].path
    assert value not in path.read_text(encoding="utf-8")
    assert _exchange(path)["target"] == f"/v1/chat/completions?{name}=[REDACTED]&api-version=2024-10-21"


def _form_post(base_url: str, code: str) -> int:
    with httpx2.Client() as client:  # an OAuth token exchange, by a client of its own
        return client.post(base_url + "/oauth/token", data={
            "grant_type": "authorization_code", "code": code, "client_secret": KEY, "redirect_uri": "x"}).status_code


def test_a_form_bodys_credential_fields_are_scrubbed_and_it_still_replays(
        server: OpenAIServer, tmp_path: Path) -> None:
    code = "SplxlOBeZQQYbYS6WxSbIA" + "Zq7pW2mX"
    path = tmp_path / "form.jsonl"
    with wire.record(path):
        status = _form_post(server.base_url, code)
    kept = _exchange(path)["request_body"]["text"]
    assert code not in kept and KEY not in kept
    assert kept == "grant_type=authorization_code&code=[REDACTED]&client_secret=[REDACTED]&redirect_uri=x"
    with wire.replay(path) as source:
        assert _form_post(server.base_url, code) == status
    assert source.served == 1 and server.count == 1


def _compressed_post(base_url: str, content: str) -> int:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": content}]}).encode()
    with httpx2.Client() as client:
        return client.post(base_url + "/chat/completions", content=gzip.compress(body, mtime=0), headers={
            "content-type": "application/json", "content-encoding": "gzip"}).status_code


def test_a_compressed_request_body_is_kept_decoded_scrubbed_and_compared(
        server: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "compressed.jsonl"
    with wire.record(path):
        status = _compressed_post(server.base_url, f"my key is {LEAK}")
    line = json.loads(path.read_text(encoding="utf-8").splitlines()[1])
    assert line["request"]["messages"][0]["content"] == "my key is [REDACTED]"
    assert line["exchange"]["request_body"] is None
    with wire.replay(path):
        assert _compressed_post(server.base_url, f"my key is {LEAK}") == status
    with pytest.raises(ReplayMismatch, match=r"at \$\.messages\[0\]\.content"), wire.replay(path):
        _compressed_post(server.base_url, "no key")


@pytest.mark.parametrize(("field", "value"), [("note", LEAK), ("api_key", KEY)])
def test_a_value_every_event_repeats_is_scrubbed_where_a_read_cuts_it(tmp_path: Path, field: str,
                                                                       value: str) -> None:
    event = b"data: " + json.dumps({"object": "chunk", field: value, "delta": "a"}).encode() + b"\n\n"
    data = event * 3
    cut = len(event) * 2 + event.index(value[4:8].encode())
    stream = _recorded_stream(tmp_path, [data[:cut], data[cut:]])
    assert [event[field] for event in _events(stream)] == ["[REDACTED]"] * 2 + ["[REDACTED][REDACTED]"]
