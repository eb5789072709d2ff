"""Each recorded call knows its model; out-of-range times, settings and decisions are
malformed lines, named by line and field; absurd --decision payloads are script errors."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cafe.cli import main
from cafe.cli.plugins import installed_plugins
from cafe.errors import ScriptError
from cafe.recording import MalformedLine, load_recording
from tests.recording.helpers import call, dump, end, header, request, response, run_cli

PLAIN_RESPONSE = {k: v for k, v in response().items() if k != "model"}


def _plain(tmp_path: Path, **line) -> Path:
    path = tmp_path / "plain.jsonl"
    path.write_bytes(dump({"request": request(), "response": PLAIN_RESPONSE, **line}))
    return path


def test_a_plain_lines_model_is_the_calls_model(tmp_path: Path):
    recording = load_recording(_plain(tmp_path, model="other-harness-model"))
    assert recording.calls[0].model == "other-harness-model" == recording.model


def test_the_request_model_counts_when_the_line_has_none(tmp_path: Path):
    path = tmp_path / "plain.jsonl"
    path.write_bytes(dump({"request": {**request(), "model": "asked-for"}, "response": PLAIN_RESPONSE}))
    assert load_recording(path).calls[0].model == "asked-for"


def test_model_precedence_line_request_response_header(tmp_path: Path):
    path = tmp_path / "v1.jsonl"
    path.write_bytes(dump(
        header(model="from-header"),
        call(1, model="from-line", request={**request(), "model": "from-request"}),
        call(2, request={**request(), "model": "from-request"}),
        call(3, response={**response(), "model": "from-response"}),
        call(4, response=PLAIN_RESPONSE),
        end(4),
    ))
    assert [c.model for c in load_recording(path).calls] == ["from-line", "from-request", "from-response",
                                                             "from-header"]


def test_a_plain_recording_exports_with_its_model(tmp_path: Path):
    path = _plain(tmp_path, model="other-harness-model")
    out, err = io.StringIO(), io.StringIO()
    code = main(["export", str(path), "--out", str(tmp_path / "p.otlp")], environ={}, out=out, err=err,
                load_plugins=installed_plugins)
    assert code == 0, err.getvalue()
    assert b"chat other-harness-model" in (tmp_path / "p.otlp").read_bytes()


BAD_TIMINGS = [
    ({"start_unix_nano": -1, "duration_ns": 1}, "timing.start_unix_nano"),
    ({"start_unix_nano": 2**64, "duration_ns": 1}, "timing.start_unix_nano"),
    ({"start_unix_nano": 1, "duration_ns": -5}, "timing.duration_ns"),
    ({"start_unix_nano": 1, "duration_ns": 10**30}, "timing.duration_ns"),
    ({"start_unix_nano": True, "duration_ns": 1}, "timing.start_unix_nano"),
    ({"start_unix_nano": 1.5, "duration_ns": 1}, "timing.start_unix_nano"),
    ({"start_unix_nano": 2**63 - 2, "duration_ns": 10}, "timing.duration_ns"),
]


@pytest.mark.parametrize(("timing", "field"), BAD_TIMINGS)
def test_out_of_range_timings_are_malformed(tmp_path: Path, timing: dict, field: str):
    path = tmp_path / "t.jsonl"
    path.write_bytes(dump(header(), call(1, timing=timing), end(1)))
    with pytest.raises(MalformedLine) as caught:
        load_recording(path)
    assert (caught.value.line, caught.value.field) == (2, field)
    code, _, err = run_cli("replay", str(path))
    assert code == 33 and err.count("\n") == 1 and f":2: {field}:" in err


BAD_HEADERS = [
    ({"decisions": [["maybe"]]}, "decisions[0][0]"),
    ({"decisions": [[True]]}, "decisions[0][0]"),
    ({"decisions": [["edit", [1, 2]]]}, "decisions[0][1]"),
    ({"decisions": [["approve", {"x": 1}]]}, "decisions[0][1]"),
    ({"clock_origin_unix_nano": -3}, "clock_origin_unix_nano"),
    ({"clock_origin_unix_nano": 10**40}, "clock_origin_unix_nano"),
    ({"seed": 2**80}, "seed"),
    ({"seed": True}, "seed"),
    ({"max_turns": 0}, "max_turns"),
    ({"max_turns": 1.0}, "max_turns"),
    ({"max_repairs": -1}, "max_repairs"),
    ({"temperature": "hot"}, "temperature"),
    ({"temperature": 1e300}, "temperature"),
]


@pytest.mark.parametrize(("changes", "field"), BAD_HEADERS)
def test_out_of_range_header_fields_are_malformed(tmp_path: Path, changes: dict, field: str):
    path = tmp_path / "h.jsonl"
    path.write_bytes(dump(header(**changes), call(1), end(1)))
    code, _, err = run_cli("replay", str(path))
    assert code == 33, err
    assert err.count("\n") == 1 and f":1: {field}:" in err


ABSURD_DECISIONS = [
    "edit=NaN", "edit=Infinity", "edit=1e999", "edit=" + "[" * 5000 + "]" * 5000, "edit=" + "9" * 10_000,
    "edit=[1, 2]", "edit=" + json.dumps({"items": ["latte"], "n": "x" * 100_000}), "edit=",
    "approve=yes", "later",
]


@pytest.mark.parametrize("decision", ABSURD_DECISIONS, ids=range(len(ABSURD_DECISIONS)))
def test_absurd_decisions_are_script_errors(decision: str):
    code, _, err = run_cli("shift", "--decision", decision, "--seed", "1")
    assert code == ScriptError.exit_code, err
    assert err.count("\n") == 1 and len(err) < 300


@settings(max_examples=60, deadline=None)
@given(payload=st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=5),
                            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                        max_size=3)))
def test_any_decision_payload_is_an_answer_never_an_internal_error(payload):
    try:
        text = json.dumps(payload)
    except ValueError:
        return
    code, _, err = run_cli("shift", "--decision", f"edit={text}", "--seed", "1")
    assert code in (0, ScriptError.exit_code), err


@pytest.mark.parametrize("timeout", ["nan", "inf", "-inf", "-1", "soon"])
def test_an_absurd_export_timeout_is_a_usage_error(tmp_path: Path, timeout: str, capsys):
    path = tmp_path / "r.jsonl"
    path.write_bytes(dump(header(), call(1), end(1)))
    code = main(["export", str(path), "--otlp=http://127.0.0.1:9", "--timeout", timeout], environ={},
                load_plugins=installed_plugins)
    assert code == 2
    err = capsys.readouterr().err
    assert "--timeout" in err and err.count("\n") == 1


def test_each_plain_call_exports_with_its_own_model_the_line_before_the_response(tmp_path: Path):
    """Two calls, each line naming its model, each response another: the spans take the lines'."""
    path = tmp_path / "two.jsonl"
    responses = [{**PLAIN_RESPONSE, "model": f"served-{n}"} for n in (1, 2)]
    path.write_bytes(dump(*({"model": f"asked-{n}", "request": request(), "response": responses[n - 1]}
                            for n in (1, 2))))
    out, err = io.StringIO(), io.StringIO()
    code = main(["export", str(path), "--out", str(tmp_path / "two.otlp")], environ={}, out=out, err=err,
                load_plugins=installed_plugins)
    assert code == 0, err.getvalue()
    written = (tmp_path / "two.otlp").read_bytes()
    assert b"chat asked-1" in written and b"chat asked-2" in written
    assert b"chat served-" not in written
