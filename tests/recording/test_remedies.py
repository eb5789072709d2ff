"""A recording replays with the settings it was made with, and every remedy an error
message suggests is followed here, as written, and works."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from cafe.cli import main
from cafe.cli.plugins import installed_plugins
from cafe.counter import record_shift
from cafe.counter.clients.scripted import ScriptedClient
from cafe.counter.consent import make_responder
from cafe.counter.shifts import replay_shift
from cafe.recording import RecordingExhausted, RecordingExists, TruncatedRecording, load_recording
from tests.recording.helpers import run_cli


def cafe(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), environ={}, out=out, err=err, load_plugins=installed_plugins)
    return code, out.getvalue(), err.getvalue()


def _flag_remedy(err: str) -> str:
    found = re.search(r"--[a-z][a-z-]+", err)
    assert found, err
    return found.group(0)


@pytest.mark.parametrize("turns", [1, 2])
def test_a_shift_recorded_with_max_turns_replays(tmp_path: Path, turns: int):
    path = tmp_path / "capped.jsonl"
    code, _, err = run_cli("shift", "--record", str(path), "--max-turns", str(turns), "--seed", "3")
    assert code == 0, err
    assert load_recording(path).header.max_turns == turns
    code, out, err = run_cli("replay", str(path))
    assert code == 0, err
    assert "transcript matches" in out
    # An explicit argument wins over the header.
    code, _, err = run_cli("replay", str(path), "--max-turns", str(turns + 5))
    assert code == RecordingExhausted.exit_code, err


def test_every_setting_of_the_run_is_kept_and_used(tmp_path: Path):
    path = tmp_path / "settings.jsonl"
    run, _ = record_shift(ScriptedClient(), ["A latte, please.", "That's all."], path,
                          responder=make_responder([("approve", None)]), decisions=[("approve", None)],
                          seed=5, max_turns=3, max_repairs=1, temperature=0.25, conversation_id="shift-x")
    header = load_recording(path).header
    assert (header.max_turns, header.max_repairs, header.temperature) == (3, 1, 0.25)
    assert header.conversation_id == "shift-x" and header.seed == 5 and header.decisions == [["approve", None]]
    again, _ = replay_shift(path)
    assert again.messages == run.messages and again.conversation_id == "shift-x"


def test_truncated_recording_remedy_works_for_replay_and_export(tmp_path: Path):
    path = tmp_path / "cut.jsonl"
    code, _, err = run_cli("shift", "--record", str(path), "--seed", "3")
    assert code == 0, err
    data = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(data[:-2]) + data[-2][: len(data[-2]) // 2])  # the last call cut short
    code, _, err = run_cli("replay", str(path))
    assert code == TruncatedRecording.exit_code
    flag = _flag_remedy(err)
    assert flag == "--allow-truncated"
    code, out, err = run_cli("replay", str(path), flag)
    assert code == 0, err
    assert "stopped after its last recorded call" in out and "every recorded call used" in out
    code, _, err = cafe("export", str(path), "--out", str(tmp_path / "cut.otlp"))
    assert code == TruncatedRecording.exit_code
    code, _, err = cafe("export", str(path), _flag_remedy(err), "--out", str(tmp_path / "cut.otlp"))
    assert code == 0, err


def test_an_unfinished_recording_replays_its_calls(tmp_path: Path):
    path = tmp_path / "unfinished.jsonl"
    run_cli("shift", "--record", str(path), "--seed", "3")
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-2]))  # no end line and one call fewer: a crash between lines
    code, out, err = run_cli("replay", str(path))
    assert code == 0, err
    assert "replayed 4 call(s)" in out


def test_recording_exists_remedy_works(tmp_path: Path):
    path = tmp_path / "twice.jsonl"
    assert run_cli("shift", "--record", str(path), "--seed", "3")[0] == 0
    code, _, err = run_cli("shift", "--record", str(path), "--seed", "4")
    assert code == RecordingExists.exit_code and "record mode 'all'" in err
    code, _, err = run_cli("shift", "--record", str(path), "--record-mode", "all", "--seed", "4")
    assert code == 0, err
    assert load_recording(path).header.seed == 4


def test_nothing_to_export_to_remedy_works(tmp_path: Path):
    path = tmp_path / "e.jsonl"
    run_cli("shift", "--record", str(path), "--seed", "3")
    code, _, err = cafe("export", str(path))
    assert code == 2 and "--out FILE" in err
    code, _, err = cafe("export", str(path), "--out", str(tmp_path / "e.otlp"))
    assert code == 0, err
