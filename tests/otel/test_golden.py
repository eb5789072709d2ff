"""A golden OTLP file beside a committed recording: CI replays the recording with zero model
calls and compares the spans byte for byte; a golden failure names its remedy, and the remedy works."""

from __future__ import annotations

import io
import os
import re
import shlex
import shutil
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from cafe.cli import main
from cafe.counter.cli import plugin as COUNTER
from cafe_otel._cli.plugin import plugin
from cafe_otel._counter.golden import GoldenMismatch, GoldenMissing, check_golden, first_change, replay_otlp
from cafe_otel._counter.plugin import plugin as COUNTER_OTEL
from cafe_otel._offline.otlp_bytes import diff

RECORDINGS = Path(__file__).resolve().parents[1] / "recordings"
RECORDING, GOLDEN = RECORDINGS / "seed-shift.jsonl", RECORDINGS / "seed-shift.otlp"


def cafe_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), environ={}, out=out, err=err, load_plugins=lambda warn: [COUNTER, COUNTER_OTEL, plugin])
    return code, out.getvalue(), err.getvalue()


def test_the_committed_recording_replays_to_its_golden_otlp():
    before = RECORDING.read_bytes(), GOLDEN.read_bytes()
    actual = replay_otlp(RECORDING)
    assert actual == GOLDEN.read_bytes(), diff(GOLDEN.read_bytes(), actual)
    assert (RECORDING.read_bytes(), GOLDEN.read_bytes()) == before


def test_a_changed_model_call_names_the_span_and_field_that_changed(tmp_path):
    changed = tmp_path / "changed.jsonl"
    text = RECORDING.read_text(encoding="utf-8")
    assert text.count('"prompt_tokens":60') == 3  # the shift's three tool-calling turns
    changed.write_text(text.replace('"prompt_tokens":60', '"prompt_tokens":61', 1), encoding="utf-8")
    with pytest.raises(GoldenMismatch) as caught:
        check_golden(changed, GOLDEN)
    message = str(caught.value)
    assert "'chat scripted-barista-1'" in message
    assert "gen_ai.usage.input_tokens = 60" in message and "gen_ai.usage.input_tokens = 61" in message
    assert "\n" not in message
    assert "-      gen_ai.usage.input_tokens = 60" in diff(caught.value.expected, caught.value.actual)


def test_a_missing_span_is_named():
    data = GOLDEN.read_bytes()
    assert first_change(data, data) is None
    request = ExportTraceServiceRequest.FromString(data)
    spans = request.resource_spans[0].scope_spans[0].spans
    last_name = spans[-1].name
    del spans[-1]
    where = first_change(data, request.SerializeToString(deterministic=True))
    assert where is not None and "span tree changed its size" in where, where
    assert last_name == "invoke_agent cafe-counter"


def test_cli_compares_updates_and_reports_a_missing_golden(tmp_path):
    recording = tmp_path / "seed.jsonl"
    shutil.copy(RECORDING, recording)
    golden = tmp_path / "seed.otlp"
    code, _, err = cafe_cli("golden", str(recording), str(golden))
    assert code == GoldenMissing.exit_code and err.count("\n") == 1
    code, out, _ = cafe_cli("golden", str(recording), str(golden), "--update")
    assert code == 0 and golden.read_bytes() == GOLDEN.read_bytes()
    code, out, _ = cafe_cli("golden", str(recording), str(golden))
    assert code == 0 and "matches" in out
    golden.write_bytes(golden.read_bytes()[:-3])
    code, _, err = cafe_cli("golden", str(recording), str(golden))
    assert code == GoldenMismatch.exit_code and err.count("\n") == 1 and "Traceback" not in err


# Remedies: a golden failure names its remedy, and the remedy works.

RECORDING = Path(__file__).resolve().parents[1] / "recordings" / "seed-shift.jsonl"


def _named_command(err: str) -> list[str] | None:
    found = re.search(r"`(cafe [^`]*)`", err)
    return shlex.split(found.group(1))[1:] if found else None


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    path = tmp_path / "seed.jsonl"
    shutil.copy(RECORDING, path)
    return path


def _cases(tmp_path: Path, recording: Path) -> dict[str, Path]:
    (tmp_path / "a-directory").mkdir()
    os.mkfifo(tmp_path / "a-fifo")
    return {"the recording": recording, "a directory": tmp_path / "a-directory",
            "a FIFO": tmp_path / "a-fifo", "a missing directory": tmp_path / "nowhere" / "g.otlp"}


def test_no_update_command_is_named_where_update_could_not_write(tmp_path: Path, recording: Path) -> None:
    before = recording.read_bytes()
    for name, golden in _cases(tmp_path, recording).items():
        code, _, err = cafe_cli("golden", str(recording), str(golden))
        assert code in (46, 47) and err.count("\n") == 1, (name, err)
        assert _named_command(err) is None and "--update cannot write it there" in err, (name, err)
        # and indeed it could not:
        code, _, update_err = cafe_cli("golden", str(recording), str(golden), "--update")
        assert code == 38, (name, update_err)
    assert recording.read_bytes() == before


def test_the_named_update_command_works_also_for_a_truncated_recording(tmp_path: Path, recording: Path) -> None:
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(recording.read_bytes()[:-10])  # the end line cut short
    golden = tmp_path / "cut.otlp"
    code, _, err = cafe_cli("golden", str(cut), str(golden), "--allow-truncated")
    assert code == 46
    command = _named_command(err)
    assert command is not None and "--allow-truncated" in command, err
    code, out, err = cafe_cli(*command)
    assert code == 0 and golden.is_file(), err
    code, out, _ = cafe_cli("golden", str(cut), str(golden), "--allow-truncated")
    assert code == 0 and "matches" in out


def test_a_mismatch_names_an_update_command_that_works(tmp_path: Path, recording: Path) -> None:
    golden = tmp_path / "seed.otlp"
    golden.write_bytes(b"not otlp")
    code, _, err = cafe_cli("golden", str(recording), str(golden))
    assert code == 47 and "accept it with" in err
    command = _named_command(err)
    assert command is not None
    assert cafe_cli(*command)[0] == 0
    assert cafe_cli("golden", str(recording), str(golden))[0] == 0
