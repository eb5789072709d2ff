"""`cafe export` sends a recording's metadata, shaped; a key fits the shape of a model name or
an id (`sk-proj-...` is letters, digits and dashes), so a plain file of another harness holding
one there put it in the span name and the model, response id and tool call id attributes. The
recording is scrubbed as `cafe view` shows it before its spans are made."""

from __future__ import annotations

import io
import json
from pathlib import Path

from cafe.cli import main

KEY = "sk-proj-Ex55ExportCanary0123456"
SEED = Path(__file__).resolve().parents[1] / "recordings" / "seed-shift.jsonl"


def _export(recording: Path, out: Path, environ: dict[str, str] | None = None) -> bytes:
    err = io.StringIO()
    code = main(["export", str(recording), "--out", str(out)], environ=environ or {}, out=io.StringIO(), err=err)
    assert code == 0, err.getvalue()
    return out.read_bytes()


def test_a_key_in_a_plain_files_metadata_does_not_leave(tmp_path: Path) -> None:
    call = {"id": KEY, "type": "function", "function": {"name": "price_check", "arguments": "{}"}}
    response = {"id": KEY, "model": KEY, "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "tool_calls": [call]}}]}
    recording = tmp_path / "theirs.jsonl"
    recording.write_text(json.dumps({"request": {"model": KEY, "messages": [{"role": "user", "content": "hi"}]},
                                     "response": response, "model": KEY}) + "\n")
    data = _export(recording, tmp_path / "theirs.otlp")
    assert KEY.encode() not in data and KEY[8:].encode() not in data
    assert b"chat" in data  # the spans are still made


def test_a_configured_pattern_applies_too(tmp_path: Path) -> None:
    response = {"id": "ACME-443311", "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "x"}}]}
    recording = tmp_path / "theirs.jsonl"
    recording.write_text(json.dumps({"request": {"messages": [{"role": "user", "content": "hi"}]},
                                     "response": response}) + "\n")
    assert b"ACME-443311" in _export(recording, tmp_path / "plain.otlp")
    assert b"ACME-443311" not in _export(recording, tmp_path / "scrubbed.otlp",
                                         {"CAFE_SCRUB_PATTERNS": r"ACME-[0-9]{6}"})


def test_a_cafe_recording_exports_the_same_bytes(tmp_path: Path) -> None:
    first = _export(SEED, tmp_path / "a.otlp")
    assert first == _export(SEED, tmp_path / "b.otlp", {"CAFE_SCRUB_PATTERNS": r"ZZZ-never-[0-9]{9}"})
