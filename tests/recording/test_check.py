"""`cafe check-recording` (cafe/recording/check.py) names the JSON path of a finding, never
its value: a key holding customer text or a secret is named by its size, a protocol key as
it is. A wire recording's stream is read whole and its bodies as bytes, as the recorder
scrubs them, and findings that cannot be printed are said to be lost."""

from __future__ import annotations

import base64
import gzip
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.recording.helpers import run_cli

KEY = "sk-proj-Ck19PathCanary0123456"
CUSTOMER = "Jo Smith lives at 1 Road"


def test_a_finding_under_a_key_of_customer_text_or_a_secret_does_not_print_the_key(tmp_path: Path) -> None:
    meta = {KEY: "call me on +44 20 7946 0123", CUSTOMER: "jo@gmail.com", "plain_key": "al@gmail.com"}
    line = {"request": {"messages": [{"role": "user", "content": "hi"}], "meta": meta},
            "response": {"choices": [{"message": {"role": "assistant", "content": "Hello."}}]}}
    path = tmp_path / "theirs.jsonl"
    path.write_text(json.dumps(line) + "\n")
    code, out, err = run_cli("check-recording", str(path))
    assert code == 39, err
    assert KEY not in out and KEY[8:] not in out and CUSTOMER not in out
    assert f"phone number (in $.request.meta.<a key of {len(KEY)} characters>)" in out
    assert f"e-mail address (in $.request.meta.<a key of {len(CUSTOMER)} characters>)" in out
    assert "e-mail address (in $.request.meta.plain_key)" in out


def test_a_broad_pattern_does_not_hide_the_protocol_keys_of_a_path(tmp_path: Path) -> None:
    line = {"request": {"messages": [{"role": "user", "content": "write to al@gmail.com"}]},
            "response": {"choices": [{"message": {"role": "assistant", "content": "Hello."}}]}}
    path = tmp_path / "theirs.jsonl"
    path.write_text(json.dumps(line) + "\n")
    code, out, _ = run_cli("check-recording", str(path), "--pattern", r"\w{8}")
    assert code == 39 and "e-mail address (in $.request.messages[0].content)" in out


# --- what a line's strings one by one do not show --------------------------------------------

LEAK = "sk-" + "proj-" + "Kq72Zx9Wm4Rt8Yp3Ln6Bv1Cs5Df0Gh2"
GITHUB_TOKEN = "ghp" + "_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def _wire_file(path: Path, exchange: dict[str, Any]) -> Path:
    """A version 2 recording another tool wrote, unscrubbed: one call holding `exchange`."""
    header = {"format": "cafe-recording", "version": 2, "harness": "another tool", "model": None, "provider": None,
              "recorded_at": "2026-01-01T00:00:00.000000Z", "seed": None, "clock_origin_unix_nano": 1}
    base = {"method": "POST", "target": "/v1/chat/completions", "request_headers": {}, "request_body": None,
            "status": 200, "response_headers": {}, "body": None, "stream": None, "outcome": "completed",
            "failure": None}
    line = {"call": 1, "request": {"model": "m"}, "response": None,
            "timing": {"start_unix_nano": 1, "duration_ns": 1}, "exchange": {**base, **exchange}}
    path.write_text(json.dumps(header) + "\n" + json.dumps(line) + "\n", encoding="utf-8")
    return path


def _sse(*events: dict[str, Any], name: str | None = None) -> bytes:
    head = f"event: {name}\n".encode() if name else b""
    return b"".join(head + b"data: " + json.dumps(event).encode() + b"\n\n" for event in events)


def _chunks(data: bytes, *cuts: int) -> list[dict[str, Any]]:
    edges = [0, *cuts, len(data)]
    return [{"offset_ns": 10 * n, "text": data[a:b].decode()} for n, (a, b) in enumerate(itertools.pairwise(edges))]


def _delta(text: str, index: int = 0) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": index, "delta": {"content": text}}]}


STREAMS = {
    "chat completions": _sse(_delta("key " + LEAK[:6]), _delta("x", 1), _delta(LEAK[6:])),
    "chat tool call": _sse(*({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {
        "arguments": piece}}]}}]} for piece in ('{"t": "' + GITHUB_TOKEN[:5], GITHUB_TOKEN[5:] + '"}')), ),
    "responses api": _sse(*({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
                             "content_index": 0, "delta": piece, "sequence_number": n}
                            for n, piece in enumerate(("a ", LEAK[:4], LEAK[4:])))),
    "anthropic": _sse(*({"type": "content_block_delta", "index": 1,
                         "delta": {"type": "input_json_delta", "partial_json": piece}}
                        for piece in ('{"k": "gh', GITHUB_TOKEN[2:], '"}')), name="content_block_delta"),
}


@pytest.mark.parametrize("shape", list(STREAMS))
def test_a_secret_cut_across_a_streams_events_and_reads_is_found(tmp_path: Path, shape: str) -> None:
    data = STREAMS[shape]
    # Cut where a raw read could end, inside the secret's own piece as well as between events.
    secret = LEAK if LEAK[:6].encode() in data or LEAK[:4].encode() in data else GITHUB_TOKEN
    inside = data.index(secret[8:12].encode() if secret is LEAK else GITHUB_TOKEN[7:11].encode()) + 2
    path = _wire_file(tmp_path / "theirs.jsonl", {"stream": _chunks(data, inside)})
    code, out, err = run_cli("check-recording", str(path))
    assert code == 39, err
    kind = "openai-style key" if secret is LEAK else "github token"
    assert f"{path}:2: secret ({kind}) (in $.exchange.stream)" in out.splitlines()
    assert secret[8:] not in out


def test_customer_data_streamed_token_by_token_is_found(tmp_path: Path) -> None:
    data = _sse(*(_delta(piece) for piece in ("write to jo.", "smith@", "gmail", ".com please")))
    path = _wire_file(tmp_path / "theirs.jsonl", {"stream": _chunks(data, 40)})
    code, out, _ = run_cli("check-recording", str(path))
    assert code == 39 and f"{path}:2: e-mail address (in $.exchange.stream)" in out.splitlines()


def test_a_stream_cafe_recorded_and_scrubbed_is_clean(tmp_path: Path) -> None:
    from cafe.privacy import Scrubber
    from cafe.wire._scrub import scrubbed_chunks

    data = STREAMS["chat completions"]
    chunks = scrubbed_chunks([data[:50], data[50:]], Scrubber())
    stream = [{"offset_ns": 1, "text": chunk.decode()} for chunk in chunks]
    code, out, _ = run_cli("check-recording", str(_wire_file(tmp_path / "ours.jsonl", {"stream": stream})))
    assert code == 0, out


def _b64(data: bytes) -> dict[str, str]:
    return {"base64": base64.b64encode(data).decode()}


def test_secrets_in_a_body_kept_as_bytes_are_found(tmp_path: Path) -> None:
    audio = b"ID3\x03\x00\xff\xfb " + LEAK.encode() + b" \x00\xfe " + GITHUB_TOKEN.encode() + b"\xff"
    path = _wire_file(tmp_path / "theirs.jsonl", {"body": _b64(audio),
                                                   "response_headers": {"content-type": "audio/mpeg"}})
    code, out, _ = run_cli("check-recording", str(path))
    assert code == 39
    assert {f"{path}:2: secret (openai-style key) (in $.exchange.body)",
            f"{path}:2: secret (github token) (in $.exchange.body)"} <= set(out.splitlines())


def test_secrets_in_an_uploads_parts_are_found(tmp_path: Path) -> None:
    boundary = "b0undary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"api_key\"\r\n\r\nZq7pW2mX9vR4tL8nB3cY\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n"
            f"Content-Type: audio/wav\r\n\r\n").encode() + b"RIFF\xff\x00" + LEAK.encode()
    body += f"\r\n--{boundary}--\r\n".encode()
    path = _wire_file(tmp_path / "theirs.jsonl", {
        "request_body": _b64(body), "request_headers": {"content-type": f"multipart/form-data; boundary={boundary}"}})
    code, out, _ = run_cli("check-recording", str(path))
    assert code == 39
    assert {f"{path}:2: secret (openai-style key) (in $.exchange.request_body)",
            f"{path}:2: secret (secret-named field) (in $.exchange.request_body)"} <= set(out.splitlines())


def test_a_body_in_an_encoding_cafe_undoes_is_read_decoded(tmp_path: Path) -> None:
    answer = json.dumps({"choices": [{"message": {"content": "use " + GITHUB_TOKEN}}]}).encode()
    path = _wire_file(tmp_path / "theirs.jsonl", {"body": _b64(gzip.compress(answer)),
                                                   "response_headers": {"content-encoding": "gzip"}})
    code, out, _ = run_cli("check-recording", str(path))
    assert code == 39 and f"{path}:2: secret (github token) (in $.exchange.body)" in out.splitlines()


def test_a_body_in_an_encoding_cafe_cannot_undo_is_reported_as_not_scanned(tmp_path: Path) -> None:
    path = _wire_file(tmp_path / "theirs.jsonl", {"body": _b64(b"\x1b\x4a\x00\xf8\xff\x07"),
                                                   "response_headers": {"content-encoding": "br"}})
    code, out, _ = run_cli("check-recording", str(path))
    assert code == 39
    assert out.splitlines() == [f"{path}:2: a body in content-encoding br, which cafe cannot decode: not scanned "
                                "(in $.exchange.body)"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_findings_that_cannot_reach_stdout_are_said_to_be_lost(tmp_path: Path) -> None:
    path = _wire_file(tmp_path / "theirs.jsonl", {"body": {"text": f"use {LEAK}"}})
    environ = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "CAFE_"))}
    environ["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "cafe", "check-recording", str(path)], stdout=full,
                              stderr=subprocess.PIPE, text=True, env=environ, timeout=120, check=False)
    assert done.returncode == 39
    assert done.stderr == ("cafe: error: check-recording: 1 finding(s) in 1 file(s); a recording is a private "
                           "artefact: commit only synthetic ones; the findings did not all reach stdout (ENOSPC)\n")


def test_a_stream_in_an_encoding_cafe_cannot_undo_is_reported_as_not_scanned(tmp_path: Path) -> None:
    path = _wire_file(tmp_path / "theirs.jsonl", {"stream": [{"offset_ns": 1, **_b64(b"\x1b\x4a\x00\xf8\xff")}],
                                                   "response_headers": {"content-encoding": "zstd"}})
    code, out, _ = run_cli("check-recording", str(path))
    assert code == 39
    assert out.splitlines() == [f"{path}:2: a stream in content-encoding zstd, which cafe cannot decode: not "
                                "scanned (in $.exchange.stream)"]
