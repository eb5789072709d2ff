"""Public API arguments of the wrong kind, and paths the file system refuses, are named
errors: a string where a list of ignore paths or customer lines belongs was taken one
character at a time (silently), a non-string ignore path was an AttributeError, a record
path with a name too long was an OSError (exit 70 from `cafe shift --record`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cafe.counter import RecordingClient, ReplayClient
from cafe.counter.clients.scripted import ScriptedClient
from cafe.counter.consent import make_responder
from cafe.counter.loop import run_shift
from cafe.errors import CafeError, ScriptError
from cafe.recording import MalformedLine, RecordingError, RecordingUnwritable, load_recording
from cafe.recording.modes import RecordMode, UnknownRecordMode
from tests.recording.helpers import call, header, run_cli, valid_bytes


def _recording(tmp_path: Path) -> Path:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(header()) + "\n" + json.dumps(call(1)) + "\n", encoding="utf-8")
    return path


def test_ignore_given_as_one_string_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match=r"ignore: expected a list of field paths, found a string"):
        ReplayClient(load_recording(_recording(tmp_path)), ignore="messages")


@pytest.mark.parametrize("odd", [None, 3, b"messages", ("messages",)])
def test_an_ignore_path_that_is_not_a_string_is_named(tmp_path: Path, odd: object) -> None:
    expected = rf"ignore: expected a field path \(a string\), found {type(odd).__name__}"
    with pytest.raises(RecordingError, match=expected):
        ReplayClient(load_recording(_recording(tmp_path)), ignore=[odd])  # type: ignore[list-item]


def test_customer_lines_given_as_one_string_are_refused() -> None:
    with pytest.raises(ScriptError, match="a list of strings, not one string"):
        run_shift(ScriptedClient(), "A latte, please.", make_responder([("approve", None)]))


def test_an_unknown_record_mode_is_a_recording_error_and_still_a_value_error(tmp_path: Path) -> None:
    with pytest.raises(UnknownRecordMode) as raised:
        RecordingClient(ScriptedClient(), tmp_path / "r.jsonl", mode="sometimes")
    assert isinstance(raised.value, CafeError) and isinstance(raised.value, ValueError)
    assert str(raised.value) == "unknown record mode 'sometimes'; use one of once, all, none"
    assert RecordMode.parse("all") is RecordMode.ALL and list(tmp_path.iterdir()) == []


def test_a_record_path_with_a_name_too_long_is_unwritable_not_an_internal_error(tmp_path: Path) -> None:
    path = tmp_path / ("a" * 300 + ".jsonl")
    with pytest.raises(RecordingUnwritable, match=r"it cannot be examined \(file name too long\)"):
        RecordingClient(ScriptedClient(), path)
    code, _, err = run_cli("shift", "--record", str(path))
    assert code == 38 and err.count("\n") == 1, err
    # A name that fits, but not with `.partial` after it:
    near = tmp_path / ("b" * 250)
    code, _, err = run_cli("shift", "--record", str(near))
    assert code == 38 and "cannot be created (file name too long)" in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("tail", [b"x", b'{"call": 3, "requ', b"\x00"])
@pytest.mark.parametrize("allow_truncated", [False, True])
def test_a_cut_line_after_the_end_line_is_malformed_not_truncation(
    tmp_path: Path, tail: bytes, allow_truncated: bool
) -> None:
    # A recorder writes nothing after the end line, so no crash leaves a line there: the
    # remedy --allow-truncated named for it did not apply (and quietly accepted the file).
    path = tmp_path / "r.jsonl"
    path.write_bytes(valid_bytes(calls=2) + tail)
    with pytest.raises(MalformedLine) as raised:
        load_recording(path, allow_truncated=allow_truncated)
    assert str(raised.value) == f"{path}:5: expected nothing after the end line, found another line"
    code, _, err = run_cli("replay", str(path))
    assert code == 33 and "--allow-truncated" not in err
