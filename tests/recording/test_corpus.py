"""Acceptance: a corpus of malformed recordings, each made here, each giving its own named
error that says which file, line and field; the CLI prints one line with that error's exit
code; no file is changed by being read."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from cafe.recording import (
    MalformedLine,
    NotARecording,
    RecordingError,
    RecordingNotFound,
    TruncatedRecording,
    UnsupportedVersion,
    load_recording,
)
from cafe.recording import format as recording_format
from cafe.recording.format import SUPPORTED_VERSIONS
from tests.recording.helpers import (
    CUSTOMER_TEXT,
    call,
    dump,
    end,
    header,
    response,
    run_cli,
    snapshot,
    valid_bytes,
)


@dataclass(frozen=True)
class Case:
    name: str
    data: bytes | None  # None: the case builds its own path
    error: type[RecordingError]
    line: int | None
    field: str | None = None


def _msg(**changes):
    return {"role": "assistant", "content": "ok", **changes}


def _tool_message(call_id=1, arguments="{}"):
    return _msg(content=None, tool_calls=[
        {"id": call_id, "type": "function", "function": {"name": "price_check", "arguments": arguments}}
    ])


H, C1, C2 = header(), call(1), call(2)
CASES = [
    Case("empty file", b"", NotARecording, None),
    Case("binary file", b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", NotARecording, 1),
    Case("binary without newline", bytes(range(256)) * 4, NotARecording, 1),
    Case("plain text", b"hello, this is not json\nsecond line\n", NotARecording, 1),
    Case("line 1 is an array", b"[1, 2, 3]\n", MalformedLine, 1),
    Case("line 1 neither header nor call", dump({"hello": "there"}), NotARecording, 1),
    Case("wrong format name", dump(header(format="other-tool")), NotARecording, 1),
    Case("version missing", dump({k: v for k, v in H.items() if k != "version"}), MalformedLine, 1, "version"),
    Case("version as string", dump(header(version="1"), C1), MalformedLine, 1, "version"),
    Case("version as boolean", dump(header(version=True), C1), MalformedLine, 1, "version"),
    Case("unsupported version", dump(header(version=max(SUPPORTED_VERSIONS) + 1), C1), UnsupportedVersion, 1,
         "version"),
    Case("version 0 with a header", dump(header(version=0), C1), UnsupportedVersion, 1, "version"),
    Case("header model wrong type", dump(header(model=42), C1), MalformedLine, 1, "model"),
    Case("header seed as string", dump(header(seed="7"), C1), MalformedLine, 1, "seed"),
    Case("header script of numbers", dump(header(script=[1]), C1), MalformedLine, 1, "script[0]"),
    Case("header decision not array", dump(header(decisions=["approve"]), C1), MalformedLine, 1, "decisions[0]"),
    Case("header missing", dump(C1, C2), MalformedLine, 1),
    Case("duplicated header", dump(H, H, C1), MalformedLine, 2),
    Case("bad JSON mid-file", dump(H, C1) + b'{"call": 2, "request": {,}\n' + dump(end(2)), MalformedLine, 3),
    Case("truncated last line", dump(H, C1) + dump(C2)[:-40], TruncatedRecording, 3),
    Case("truncated header", dump(H)[:30], TruncatedRecording, 1),
    Case("calls out of order", dump(H, C1, call(3)), MalformedLine, 3, "call"),
    Case("call number missing", dump(H, {k: v for k, v in C1.items() if k != "call"}), MalformedLine, 2, "call"),
    Case("call number as string", dump(H, call(1, call="1")), MalformedLine, 2, "call"),
    Case("request missing", dump(H, {k: v for k, v in C1.items() if k != "request"}), MalformedLine, 2, "request"),
    Case("request is an array", dump(H, call(1, request=[1])), MalformedLine, 2, "request"),
    Case("messages missing", dump(H, call(1, request={"tools": None})), MalformedLine, 2, "request.messages"),
    Case("message not an object", dump(H, call(1, request={"messages": [CUSTOMER_TEXT]})),
         MalformedLine, 2, "request.messages[0]"),
    Case("message without role", dump(H, call(1, request={"messages": [{"content": CUSTOMER_TEXT}]})),
         MalformedLine, 2, "request.messages[0].role"),
    Case("temperature as string", dump(H, call(1, request={"messages": [], "temperature": "hot"})),
         MalformedLine, 2, "request.temperature"),
    Case("response missing", dump(H, {k: v for k, v in C1.items() if k != "response"}), MalformedLine, 2, "response"),
    Case("array response", dump(H, call(1, response=[response()])), MalformedLine, 2, "response"),
    Case("choices empty", dump(H, call(1, response={**response(), "choices": []})),
         MalformedLine, 2, "response.choices"),
    Case("choices missing", dump(H, call(1, response={"id": "x"})), MalformedLine, 2, "response.choices"),
    Case("choice not an object", dump(H, call(1, response={"choices": [CUSTOMER_TEXT]})),
         MalformedLine, 2, "response.choices[0]"),
    Case("choice without message", dump(H, call(1, response={"choices": [{"index": 0}]})),
         MalformedLine, 2, "response.choices[0].message"),
    Case("message content a number", dump(H, call(1, response=response(_msg(content=3.5)))),
         MalformedLine, 2, "response.choices[0].message.content"),
    Case("tool call id a number", dump(H, call(1, response=response(_tool_message(call_id=1)))),
         MalformedLine, 2, "response.choices[0].message.tool_calls[0].id"),
    Case("tool call id null", dump(H, call(1, response=response(_tool_message(call_id=None)))),
         MalformedLine, 2, "response.choices[0].message.tool_calls[0].id"),
    Case("tool arguments an object", dump(H, call(1, response=response(_tool_message("c1", {"a": 1})))),
         MalformedLine, 2, "response.choices[0].message.tool_calls[0].function.arguments"),
    Case("usage an array", dump(H, call(1, response={**response(), "usage": [1]})), MalformedLine, 2, "response.usage"),
    Case("timing a string", dump(H, call(1, timing="1s")), MalformedLine, 2, "timing"),
    Case("timing negative", dump(H, call(1, timing={"start_unix_nano": 1, "duration_ns": -5})),
         MalformedLine, 2, "timing.duration_ns"),
    Case("timing a float", dump(H, call(1, timing={"start_unix_nano": 1.5, "duration_ns": 5})),
         MalformedLine, 2, "timing.start_unix_nano"),
    Case("line after the end line", dump(H, C1, end(1), C2), MalformedLine, 4),
    Case("two end lines", dump(H, C1, end(1), end(1)), MalformedLine, 4),
    Case("end counts wrong", dump(H, C1, C2, end(5)), MalformedLine, 4, "end.model_calls"),
    Case("end without stop reason", dump(H, C1, {"end": {"model_calls": 1, "transcript_sha256": "0" * 64}}),
         MalformedLine, 3, "end.stop_reason"),
    Case("end an array", dump(H, C1, {"end": [1]}), MalformedLine, 3, "end"),
    Case("end digest not hex", dump(H, C1, end(1, transcript_sha256=CUSTOMER_TEXT)),
         MalformedLine, 3, "end.transcript_sha256"),
    Case("blank line in the middle", dump(H, C1) + b"\n" + dump(C2), MalformedLine, 3),
    Case("whitespace line at the end", dump(H, C1) + b"   \n", MalformedLine, 3),
    Case("non-object line", dump(H, C1, [CUSTOMER_TEXT]), MalformedLine, 3),
    Case("string line", dump(H, C1, CUSTOMER_TEXT), MalformedLine, 3),
    Case("NaN number", dump(H) + json.dumps(call(1, request={"messages": [], "temperature": float("nan")})).encode()
         + b"\n", MalformedLine, 2),
    Case("duplicated key", dump(H) + b'{"call": 1, "call": 2}\n', MalformedLine, 2),
    Case("invalid UTF-8 mid-file", dump(H) + b'{"call": 1, "x": "\xc3\x28"}\n', MalformedLine, 2),
    Case("nesting too deep", dump(H) + b'{"call": ' + b"[" * 200_000 + b"]" * 200_000 + b"}\n", MalformedLine, 2),
    Case("integer too long", dump(H) + b'{"call": ' + b"9" * 5000 + b"}\n", MalformedLine, 2),
    Case("legacy line missing response", dump({"request": {"messages": []}, "response": response()},
                                              {"request": {"messages": []}}), MalformedLine, 2, "response"),
    Case("huge line over the limit", dump(H) + b'{"call": 1, "pad": "' + b"x" * 5000 + b'"}\n' + dump(end(0)),
         MalformedLine, 2),
    Case("directory instead of file", None, NotARecording, None),
    Case("missing file", None, RecordingNotFound, None),
]


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 30
    assert len({case.name for case in CASES}) == len(CASES)


def _materialise(case: Case, tmp_path: Path) -> Path:
    path = tmp_path / (case.name.replace(" ", "-") + ".jsonl")
    if case.name == "directory instead of file":
        path.mkdir()
    elif case.name != "missing file":
        assert case.data is not None
        path.write_bytes(case.data)
        os.chmod(path, 0o600)
    return path


@pytest.fixture(autouse=True)
def _small_lines(monkeypatch):
    # Lets the huge-line case stay small; every valid case is far below this.
    monkeypatch.setattr(recording_format, "MAX_LINE_BYTES", 4096)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_each_malformed_recording_gives_its_named_error(case: Case, tmp_path: Path):
    if case.name == "nesting too deep" or case.name == "integer too long":
        recording_format.MAX_LINE_BYTES = 16 * 1024 * 1024  # restored by monkeypatch
    path = _materialise(case, tmp_path)
    before = snapshot(path) if path.is_file() else None

    with pytest.raises(RecordingError) as caught:
        load_recording(path)
    error = caught.value
    assert type(error) is case.error, f"{case.name}: got {type(error).__name__}: {error}"
    message = str(error)
    assert message.startswith(str(path)), message
    assert error.path == path
    if case.line is not None:
        assert message.startswith(f"{path}:{case.line}:"), message
        assert error.line == case.line
    if case.field is not None:
        assert f":{case.line}: {case.field}:" in message, message
        assert getattr(error, "field", None) == case.field
    if isinstance(error, MalformedLine):
        assert "expected " in message and ", found " in message
    assert CUSTOMER_TEXT not in message and "CUSTOMER-CANARY" not in message
    assert "\n" not in message and len(message) < 400

    code, out, err = run_cli("replay", str(path))
    assert code == case.error.exit_code
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("cafe: error: ") and "Traceback" not in err
    assert "CUSTOMER-CANARY" not in err

    if before is not None:
        assert snapshot(path) == before, "reading a recording must not change it"


def test_exit_codes_are_distinct():
    classes = {case.error for case in CASES}
    from cafe.recording import errors

    named = [getattr(errors, name) for name in dir(errors)
             if isinstance(getattr(errors, name), type) and issubclass(getattr(errors, name), RecordingError)]
    codes = [cls.exit_code for cls in named]
    assert len(codes) == len(set(codes)), sorted(codes)
    assert classes <= set(named)


def test_truncated_last_line_keeps_the_complete_calls(tmp_path: Path):
    path = tmp_path / "cut.jsonl"
    path.write_bytes(dump(header(), call(1), call(2)) + dump(call(3))[:-25])
    before = snapshot(path)
    with pytest.raises(TruncatedRecording) as caught:
        load_recording(path)
    assert caught.value.complete_calls == 2 and "--allow-truncated" in str(caught.value)
    recording = load_recording(path, allow_truncated=True)
    assert recording.truncated and [c.index for c in recording.calls] == [1, 2]
    assert snapshot(path) == before


def test_unterminated_but_valid_last_line_is_complete(tmp_path: Path):
    path = tmp_path / "no-newline.jsonl"
    path.write_bytes(valid_bytes(2)[:-1])
    recording = load_recording(path)
    assert not recording.truncated and len(recording.calls) == 2 and recording.ending is not None


def test_a_bad_line_in_the_middle_is_not_excused_as_truncation(tmp_path: Path):
    path = tmp_path / "mid.jsonl"
    path.write_bytes(dump(header(), call(1)) + b"{broken\n" + dump(call(2)))
    with pytest.raises(MalformedLine):
        load_recording(path, allow_truncated=True)


def test_cli_allow_truncated_replays_the_complete_lines(tmp_path: Path):
    from cafe.counter import record_shift
    from cafe.counter.clients.scripted import ScriptedClient
    from cafe.counter.consent import make_responder

    path = tmp_path / "shift.jsonl"
    record_shift(ScriptedClient(), ["A latte, please.", "Nothing else."], path,
                 responder=make_responder([("approve", None)]), seed=3)
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(lines[:-1]) + lines[-1][:10])  # the end line cut short
    code, _, err = run_cli("replay", str(cut))
    assert code == TruncatedRecording.exit_code and err.count("\n") == 1
    code, out, err = run_cli("replay", str(cut), "--allow-truncated")
    assert code == 0, err
    assert "replayed" in out


def test_a_fifo_or_device_is_refused_without_blocking(tmp_path: Path):
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        with pytest.raises(NotARecording, match="not a regular file"):
            load_recording(path)
        code, _, err = run_cli("replay", str(path))
        assert code == NotARecording.exit_code and err.count("\n") == 1
